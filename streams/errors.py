"""Every error dcb-streams raises, each with a stable machine-readable ``code``.

Callers branch on ``code`` (and the CLI prints it), never on message text, so
codes are part of the public contract: renaming one is a breaking change.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self


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


class TopicLayoutMismatchError(InfraError):
    """The topics were created with another tag placement or partition counts than these
    settings give; keys would land where their state is not."""

    code = "topic_layout_mismatch"


class TopicAdminError(InfraError):
    """The broker refused a topic administration request."""

    code = "topic_admin_failed"


# --- validation (bad input from a client or a topic) ---------------------------


class ValidationError(DcbError):
    """Input breaks a documented bound or rule; nothing was written."""

    code = "validation_error"


class InvalidSuidError(ValidationError):
    """A SUID is not a 30-digit decimal string."""

    code = "invalid_suid"


class TagSetEmptyError(ValidationError):
    """An event carries no tag once blanks are dropped; every event needs a boundary."""

    code = "tags_empty"


class TooManyTagsError(ValidationError):
    """An event carries more distinct tags than the bound (32)."""

    code = "too_many_tags"


class TagTooLongError(ValidationError):
    """A tag is longer than the bound (256 code points)."""

    code = "tag_too_long"


class EmptyAttemptError(ValidationError):
    """A commit attempt carries no events."""

    code = "empty_attempt"


class AttemptTooLargeError(ValidationError):
    """A commit attempt carries more events than the bound."""

    code = "attempt_too_large"


class InvalidEventError(ValidationError):
    """An event is malformed: blank type or id, or a payload that is not JSON."""

    code = "invalid_event"


class InvalidConditionError(ValidationError):
    """An append condition cannot be checked per tag (an item without tags, or too many items)."""

    code = "invalid_condition"


# --- the commit path -------------------------------------------------------------


class AppendConditionFailed(DcbError):
    """An event matching the condition's query exists (or is pending) after its position."""

    code = "append_condition_failed"


class ConditionBelowArchiveError(DcbError):
    """A condition's position lies below what a tag table trimmed (its events are in the
    history archive), so the table cannot check it. ``DcbClient.append`` answers it by
    reading the query over archive and log and sending the attempt again positioned at
    the trimmed SUID (``trimmedThrough``); its caller sees it only when that read could
    not reach the trim or the trims kept moving (an archive run in between)."""

    code = "condition_below_archive"


class TrimRefusedError(DcbError):
    """A TRIM the ledger cannot send: its SUID lies above the service's certified prefix
    (events at or below it could still commit)."""

    code = "trim_refused"


class StaleFenceError(DcbError):
    """A writer was fenced: something newer took over what it writes to (a higher writer
    epoch at a service or a tag, a newer runner or a rebuild of a projection), so its
    writes are refused. Every kind of fencing surfaces as this one error, saying what was
    fenced, the writer's stale token and the current one (``None`` where Kafka's
    transactional fencing does not say)."""

    code = "stale_fence"

    @classmethod
    def of(cls, fenced: str, stale: object, current: object | None) -> Self:
        now = "newer" if current is None else current
        return cls(
            f"stale fence on {fenced}: the writer holds {stale}, the current fence is {now}",
            fenced=fenced,
            stale=stale,
            current=current,
        )


class LedgerError(DcbError):
    """The issuance ledger refused an operation that would corrupt it."""

    code = "ledger_error"


class DivergentReplayError(LedgerError):
    """An attempt id came back with different events: idempotency keys must not be reused."""

    code = "divergent_replay"


class EvidenceMismatchError(LedgerError):
    """Resolution evidence does not match the immutable envelope it claims to resolve."""

    code = "evidence_mismatch"


class CorruptLedgerError(LedgerError):
    """The ledger's own indexes disagree (count vs index); the certificate is withheld."""

    code = "corrupt_ledger"


class TagProtocolError(DcbError):
    """A delivery breaks the protocol (install without a reservation); it is dead-lettered."""

    code = "tag_protocol_error"


class CorruptTagTableError(DcbError):
    """A tag table's header counts an installed event its rows do not hold."""

    code = "corrupt_tag_table"


class KafkaUnavailableError(DcbError):
    """The broker did not answer a client request (in time)."""

    code = "kafka_unavailable"


class NotAuthorizedError(DcbError):
    """The broker refused this principal (no ACL grants it, or the login failed)."""

    code = "not_authorized"


class AnswerTimeoutError(DcbError):
    """No answer to an attempt in time: its outcome is unknown (a retry is a new attempt)."""

    code = "answer_timeout"


class ReservationExpiredError(DcbError):
    """The attempt was not decided within the grace window; the reconciler fenced it."""

    code = "reservation_expired"


class WorkerStartError(InfraError):
    """A worker process exited or did not become ready in time."""

    code = "worker_start_failed"


class WorkerStalledError(InfraError):
    """A worker could not commit, restore or reach the broker within its stall timeout; it
    exits for its supervisor to start it again."""

    code = "worker_stalled"


class PostgresStartError(InfraError):
    """A local PostgreSQL server could not be initialised or started."""

    code = "postgres_start_failed"


class PostgresQueryError(InfraError):
    code = "postgres_query_failed"


class ConnectStartError(InfraError):
    """The Kafka Connect worker could not be fetched, started, or did not answer."""

    code = "connect_start_failed"


class ConnectorFailedError(InfraError):
    """Kafka Connect refused a connector, or its task did not reach RUNNING."""

    code = "connector_failed"


class PeerUnavailableError(InfraError):
    """A system the peer bench compares with cannot be had here (say which and why)."""

    code = "peer_unavailable"


class BenchBusyError(InfraError):
    """Another benchmark runs on this machine (they would share its broker and cores)."""

    code = "bench_busy"
