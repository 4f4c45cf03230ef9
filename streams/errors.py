"""Every error dcb-streams raises, each with a stable machine-readable ``code``.

Callers branch on ``code`` (and the CLI prints it), never on message text, so
codes are part of the public contract: renaming one is a breaking change.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DcbError(Exception):
    """Base of every dcb-streams error."""

    code: ClassVar[str] = "dcb_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The structured form printed by the CLI and written to dead letters."""
        return {"code": self.code, "message": self.message, "details": self.details}


# --- codec -------------------------------------------------------------------


class CodecError(DcbError):
    """Bytes could not be turned into a record (or a record into bytes)."""

    code = "codec_error"


class MalformedRecordError(CodecError):
    """The bytes are not a well-formed encoded record (bad header, truncated body)."""

    code = "malformed_record"


class UnknownSchemaError(CodecError):
    """The bytes name a schema (fingerprint or registry id) that is not known."""

    code = "unknown_schema"


class UnexpectedSchemaError(CodecError):
    """The bytes are a known schema, but not the one this topic carries."""

    code = "unexpected_schema"


class InvalidRecordError(CodecError):
    """A record does not conform to its schema, so it cannot be encoded."""

    code = "invalid_record"


class SchemaRegistryError(CodecError):
    """The configured schema registry could not be reached or refused a request."""

    code = "schema_registry_error"


# --- infrastructure ------------------------------------------------------------


class InfraError(DcbError):
    """The embedded infrastructure (broker launcher, topic admin) failed."""

    code = "infra_error"


class KafkaFetchError(InfraError):
    """Apache Kafka could not be fetched from Maven Central."""

    code = "kafka_fetch_failed"


class BrokerAlreadyRunningError(InfraError):
    """``broker start`` found a broker it started earlier still running."""

    code = "broker_already_running"


class BrokerPortInUseError(InfraError):
    """Something else already listens on the broker's port."""

    code = "broker_port_in_use"


class BrokerStartError(InfraError):
    """The broker process exited or did not answer metadata requests in time."""

    code = "broker_start_failed"


class TopicConfigMismatchError(InfraError):
    """An existing topic differs from its spec (partitions or cleanup policy)."""

    code = "topic_config_mismatch"


class TopicAdminError(InfraError):
    """The broker refused a topic administration request."""

    code = "topic_admin_failed"
