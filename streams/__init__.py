"""dcb-streams: a Kafka-native event store with Dynamic Consistency Boundaries."""

from streams.errors import DcbError

__version__ = "0.1.0"

__all__ = ["DcbError", "__version__"]
