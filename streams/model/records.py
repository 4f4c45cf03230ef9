"""Pydantic mirrors of the Avro records, used at the edges (SDK, CLI, HTTP).

Field names are snake_case in Python and camelCase on the wire (the Avro
names); ``to_avro`` / ``from_avro`` convert. Unknown fields are refused, so a
typo in a client's JSON is an error instead of silently dropped data.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from streams.errors import DcbError
from streams.subclasses import subclass_tree

if TYPE_CHECKING:
    from streams.codec import AvroCodec


class AvroRecord(BaseModel):
    """A model that is also one Avro record type of ``schemas/``."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
    )
    schema_name: ClassVar[str]

    def to_avro(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    @classmethod
    def from_avro(cls, value: dict[str, Any]) -> Self:
        return cls.model_validate(value)

    @classmethod
    def from_bytes(cls, codec: AvroCodec, data: bytes | None) -> Self:
        """A record read from its encoded bytes (any other schema's bytes are refused)."""
        return cls.from_avro(codec.decode(data, cls.schema_name).value)


class QueryItem(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.QueryItem"
    types: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)


class AppendCondition(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.AppendCondition"
    fail_if_events_match: list[QueryItem]
    after: str | None = None


class EventData(AvroRecord):
    """An event as it is stored: its ``payload`` is JSON text (``data`` reads it)."""

    schema_name: ClassVar[str] = "dcb.streams.EventData"
    event_id: str
    event_type: str
    payload: str
    tags: list[str]
    timestamp: datetime
    causation_id: str | None = None
    correlation_id: str | None = None
    executed_user: str | None = None

    @property
    def type(self) -> str:
        return self.event_type

    @property
    def data(self) -> Any:
        """The payload, parsed from its JSON."""
        return json.loads(self.payload)


class ErrorInfo(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.ErrorInfo"
    code: str
    message: str
    details_json: str | None = None

    @classmethod
    def of(cls, exc: DcbError) -> ErrorInfo:
        details = json.dumps(exc.details, sort_keys=True, default=str) if exc.details else None
        return cls(code=exc.code, message=exc.message, details_json=details)


class CommitAttempt(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.CommitAttempt"
    attempt_id: str
    writer_epoch: int
    events: list[EventData]
    condition: AppendCondition | None = None


class ReconcileRequest(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.ReconcileRequest"
    skip_grace: bool
    requested_by: str | None = None


class TrimRequest(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.TrimRequest"
    through: str
    requested_by: str | None = None


class Command(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.Command"
    service_id: str
    command_id: str
    issued_at: datetime
    kind: Literal["COMMIT", "RECONCILE", "TRIM"]
    commit: CommitAttempt | None = None
    reconcile: ReconcileRequest | None = None
    trim: TrimRequest | None = None

    @classmethod
    def of_commit(cls, service_id: str, attempt: CommitAttempt) -> Command:
        """The COMMIT of ``attempt``: its command id is the attempt id (the answer's key)."""
        return cls(
            service_id=service_id,
            command_id=attempt.attempt_id,
            issued_at=datetime.now(UTC),
            kind="COMMIT",
            commit=attempt,
        )

    @classmethod
    def of_request(cls, service_id: str, request: ReconcileRequest | TrimRequest) -> Command:
        """An operator's request to a service's ledger, under a fresh command id."""
        if isinstance(request, ReconcileRequest):
            body: dict[str, Any] = {"kind": "RECONCILE", "reconcile": request}
        else:
            body = {"kind": "TRIM", "trim": request}
        return cls(
            service_id=service_id, command_id=str(uuid.uuid4()), issued_at=datetime.now(UTC), **body
        )


class AllocatedCandidate(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.AllocatedCandidate"
    index: int
    event_id: str
    suid: str
    tags: list[str]
    identity_digest: str


class Allocation(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.Allocation"
    service_id: str
    allocator_lineage_id: str
    attempt_id: str
    writer_epoch: int
    one_phase: bool = False
    candidates: list[AllocatedCandidate]


class AllocationBatch(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.AllocationBatch"
    source_partition: int
    allocated_at: datetime
    allocations: list[Allocation]


class TargetRecord(AvroRecord):
    """The fields naming one target (a candidate's tag), shared by deliveries and resolutions."""

    service_id: str
    tag: str
    allocator_lineage_id: str
    attempt_id: str
    suid: str
    event_id: str
    identity_digest: str

    def target_fields(self) -> dict[str, str]:
        """The shared fields by name, to answer a delivery about the same target."""
        return {name: getattr(self, name) for name in _TARGET_FIELDS}


# Read once: pydantic's ``model_fields`` is a descriptor that costs more than the copy.
_TARGET_FIELDS = tuple(TargetRecord.model_fields)


class TagDelivery(TargetRecord):
    schema_name: ClassVar[str] = "dcb.streams.TagDelivery"
    action: Literal["PREPARE", "INSTALL", "FENCE", "TRIM"]
    writer_epoch: int
    fence_epoch: int | None = None
    condition: AppendCondition | None = None
    event: EventData | None = None
    one_phase: bool = False
    settled_through: str | None = None


class TagDeliveryBatch(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.TagDeliveryBatch"
    source_partition: int
    sent_at: datetime
    items: list[TagDelivery]


class TagResolution(TargetRecord):
    schema_name: ClassVar[str] = "dcb.streams.TagResolution"
    status: Literal[
        "PREPARED", "REJECTED", "INSTALLED_AND_COVERED", "ABSENT_AND_IRREVOCABLY_FENCED"
    ]
    obligation_digest: str | None = None
    tombstone_epoch: int | None = None
    rejection: ErrorInfo | None = None


class TagResolutionBatch(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.TagResolutionBatch"
    source_partition: int
    observed_at: datetime
    items: list[TagResolution]


class CommittedEvent(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.CommittedEvent"
    service_id: str
    suid: str
    allocator_lineage_id: str
    attempt_id: str
    event: EventData


class PartitionOffset(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.PartitionOffset"
    partition: int
    offset: int


class Certificate(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.Certificate"
    certificate_version: int
    authority: str
    status: Literal["READY", "UNRECONCILED"]
    allocator_lineage_id: str
    service_id: str
    closed_prefix_suid: str | None = None
    unresolved_count: int
    generated_at: datetime
    migration_proof_id: str | None = None
    coverage: list[PartitionOffset]


class CommitResult(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.CommitResult"
    service_id: str
    attempt_id: str
    outcome: Literal["COMMITTED", "REJECTED"]
    suids: list[str]
    error: ErrorInfo | None = None
    decided_at: datetime

    @classmethod
    def rejected(
        cls, service_id: str, attempt_id: str, error: ErrorInfo | None, at: datetime
    ) -> CommitResult:
        return cls(
            service_id=service_id,
            attempt_id=attempt_id,
            outcome="REJECTED",
            suids=[],
            error=error,
            decided_at=at,
        )


class DeadLetter(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.DeadLetter"
    service_id: str | None = None
    source_topic: str
    source_partition: int
    source_offset: int
    source_key: bytes | None = None
    source_value: bytes | None = None
    item_index: int | None = None
    processor: str
    error: ErrorInfo
    failed_at: datetime


class StoreLayout(AvroRecord):
    schema_name: ClassVar[str] = "dcb.streams.StoreLayout"
    tag_placement: Literal["SERVICE", "TAG"]
    partitions: int
    tag_partitions: int
    created_at: datetime


def record_types() -> dict[str, type[AvroRecord]]:
    """Every concrete record model by its Avro full name."""
    return {
        cls.schema_name: cls for cls in subclass_tree(AvroRecord) if "schema_name" in cls.__dict__
    }
