"""dcb-streams: a Kafka-native event store with Dynamic Consistency Boundaries.

The names a program needs, as the DCB specification calls them::

    from streams import DcbClient, Event, Query, QueryItem, AppendCondition
"""

from __future__ import annotations

import importlib
from typing import Any

from streams.errors import AppendConditionFailed, DcbError
from streams.model.records import AppendCondition, QueryItem

__version__ = "0.1.0"

# The client pulls in the Kafka clients: loaded when first asked for, not by every
# ``import streams.<anything>``.
_SDK = {
    "AppendResult",
    "AsyncDcbClient",
    "DcbClient",
    "Event",
    "Query",
    "ReadResult",
    "SequencedEvent",
}

__all__ = [
    "AppendCondition",
    "AppendConditionFailed",
    "DcbError",
    "QueryItem",
    "__version__",
    *sorted(_SDK),
]


def __getattr__(name: str) -> Any:
    if name in _SDK:
        return getattr(importlib.import_module("streams.sdk"), name)
    raise AttributeError(f"module 'streams' has no attribute {name!r}")
