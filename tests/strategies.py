"""Hypothesis strategies for every Avro record type, and one fixed sample of each topic record."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from hypothesis import strategies as st

from streams.model import records as r

SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # not text: UTF-8 cannot hold them
texts = st.text(alphabet=st.characters(exclude_categories=SURROGATES), max_size=40)
ids = st.uuids().map(str)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
suids = st.integers(min_value=0, max_value=10**30 - 1).map(lambda n: f"{n:030d}")
# Avro timestamp-millis keeps milliseconds and reads back as UTC.
millis = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
tag_lists = st.lists(texts, max_size=5)
maybe = st.none().__or__


def model(
    cls: type[r.AvroRecord], **fields: st.SearchStrategy[object]
) -> st.SearchStrategy[r.AvroRecord]:
    """Records from explicit field strategies (``st.builds`` trips over the camelCase aliases)."""
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


query_items = model(r.QueryItem, types=st.lists(texts, max_size=3), tags=tag_lists)
conditions = model(
    r.AppendCondition, fail_if_events_match=st.lists(query_items, max_size=3), after=maybe(suids)
)
event_data = model(
    r.EventData,
    event_id=ids,
    event_type=texts,
    payload=texts,
    tags=tag_lists,
    timestamp=millis,
    causation_id=maybe(ids),
    correlation_id=maybe(ids),
    executed_user=maybe(texts),
)
error_infos = model(r.ErrorInfo, code=texts, message=texts, details_json=maybe(texts))
commands = st.one_of(
    model(
        r.Command,
        service_id=texts,
        command_id=ids,
        issued_at=millis,
        kind=st.just("COMMIT"),
        commit=model(
            r.CommitAttempt,
            attempt_id=ids,
            writer_epoch=longs,
            events=st.lists(event_data, max_size=3),
            condition=maybe(conditions),
        ),
        reconcile=st.none(),
    ),
    model(
        r.Command,
        service_id=texts,
        command_id=ids,
        issued_at=millis,
        kind=st.just("RECONCILE"),
        commit=st.none(),
        reconcile=model(r.ReconcileRequest, skip_grace=st.booleans(), requested_by=maybe(texts)),
    ),
)
allocations = model(
    r.Allocation,
    service_id=texts,
    allocator_lineage_id=ids,
    attempt_id=ids,
    writer_epoch=longs,
    one_phase=st.booleans(),
    candidates=st.lists(
        model(
            r.AllocatedCandidate,
            index=ints,
            event_id=ids,
            suid=suids,
            tags=tag_lists,
            identity_digest=texts,
        ),
        max_size=3,
    ),
)
allocation_batches = model(
    r.AllocationBatch,
    source_partition=ints,
    allocated_at=millis,
    allocations=st.lists(allocations, max_size=3),
)
target_fields: dict[str, st.SearchStrategy[object]] = {
    "service_id": texts,
    "tag": texts,
    "allocator_lineage_id": ids,
    "attempt_id": ids,
    "suid": suids,
    "event_id": ids,
    "identity_digest": texts,
}
tag_deliveries = model(
    r.TagDelivery,
    **target_fields,
    action=st.sampled_from(["PREPARE", "INSTALL", "FENCE"]),
    writer_epoch=longs,
    fence_epoch=maybe(longs),
    condition=maybe(conditions),
    event=maybe(event_data),
    one_phase=st.booleans(),
)
tag_delivery_batches = model(
    r.TagDeliveryBatch,
    source_partition=ints,
    sent_at=millis,
    items=st.lists(tag_deliveries, max_size=3),
)
tag_resolutions = model(
    r.TagResolution,
    **target_fields,
    status=st.sampled_from(
        ["PREPARED", "REJECTED", "INSTALLED_AND_COVERED", "ABSENT_AND_IRREVOCABLY_FENCED"]
    ),
    obligation_digest=maybe(texts),
    tombstone_epoch=maybe(longs),
    rejection=maybe(error_infos),
)
tag_resolution_batches = model(
    r.TagResolutionBatch,
    source_partition=ints,
    observed_at=millis,
    items=st.lists(tag_resolutions, max_size=3),
)
committed_events = model(
    r.CommittedEvent,
    service_id=texts,
    suid=suids,
    allocator_lineage_id=ids,
    attempt_id=ids,
    event=event_data,
)
certificates = model(
    r.Certificate,
    certificate_version=ints,
    authority=texts,
    status=st.sampled_from(["READY", "UNRECONCILED"]),
    allocator_lineage_id=ids,
    service_id=texts,
    closed_prefix_suid=maybe(suids),
    unresolved_count=longs,
    generated_at=millis,
    migration_proof_id=maybe(ids),
    coverage=st.lists(model(r.PartitionOffset, partition=ints, offset=longs), max_size=4),
)
commit_results = model(
    r.CommitResult,
    service_id=texts,
    attempt_id=ids,
    outcome=st.sampled_from(["COMMITTED", "REJECTED"]),
    suids=st.lists(suids, max_size=3),
    error=maybe(error_infos),
    decided_at=millis,
)
dead_letters = model(
    r.DeadLetter,
    service_id=maybe(texts),
    source_topic=texts,
    source_partition=ints,
    source_offset=longs,
    source_key=maybe(st.binary(max_size=20)),
    source_value=maybe(st.binary(max_size=50)),
    item_index=maybe(ints),
    processor=texts,
    error=error_infos,
    failed_at=millis,
)

store_layouts = model(
    r.StoreLayout,
    tag_placement=st.sampled_from(["SERVICE", "TAG"]),
    partitions=ints,
    tag_partitions=ints,
    created_at=millis,
)

TOPIC_RECORDS: dict[type[r.AvroRecord], st.SearchStrategy[r.AvroRecord]] = {
    r.Command: commands,
    r.AllocationBatch: allocation_batches,
    r.TagDeliveryBatch: tag_delivery_batches,
    r.TagResolutionBatch: tag_resolution_batches,
    r.CommittedEvent: committed_events,
    r.Certificate: certificates,
    r.CommitResult: commit_results,
    r.DeadLetter: dead_letters,
    r.StoreLayout: store_layouts,
}

ALL_RECORDS: dict[type[r.AvroRecord], st.SearchStrategy[r.AvroRecord]] = {
    **TOPIC_RECORDS,
    r.QueryItem: query_items,
    r.AppendCondition: conditions,
    r.EventData: event_data,
    r.ErrorInfo: error_infos,
    r.Allocation: allocations,
    r.TagDelivery: tag_deliveries,
    r.TagResolution: tag_resolutions,
}


def samples() -> list[r.AvroRecord]:
    """One deterministic, fully populated record per topic record type."""
    at = datetime(2026, 12, 2, 18, 0, 0, 123000, tzinfo=UTC)
    event = r.EventData(
        event_id="0193a1b2-0000-7000-8000-000000000001",
        event_type="StudentSubscribed",
        payload='{"studentId":"s7","courseId":"c1"}',
        tags=["course:c1", "student:s7"],
        timestamp=at,
        causation_id="cause-1",
        correlation_id="corr-1",
        executed_user="alice",
    )
    condition = r.AppendCondition(
        fail_if_events_match=[r.QueryItem(types=["StudentSubscribed"], tags=["course:c1"])],
        after="638999999999999999900000000001",
    )
    suid = "638999999999999999900000000002"
    error = r.ErrorInfo(
        code="append_condition_failed",
        message="course c1 is full",
        details_json='{"tag":"course:c1"}',
    )
    target = r.TargetRecord(  # the delivery and the resolution are about one target
        service_id="svc",
        tag="course:c1",
        allocator_lineage_id="lin-1",
        attempt_id="a1",
        suid=suid,
        event_id=event.event_id,
        identity_digest="ab" * 32,
    ).target_fields()
    return [
        r.Command(
            service_id="svc",
            command_id="a1",
            issued_at=at,
            kind="COMMIT",
            commit=r.CommitAttempt(
                attempt_id="a1", writer_epoch=3, events=[event], condition=condition
            ),
        ),
        r.Command(
            service_id="svc",
            command_id="op-1",
            issued_at=at,
            kind="RECONCILE",
            reconcile=r.ReconcileRequest(skip_grace=True, requested_by="ops"),
        ),
        r.AllocationBatch(
            source_partition=1,
            allocated_at=at,
            allocations=[
                r.Allocation(
                    service_id="svc",
                    allocator_lineage_id="lin-1",
                    attempt_id="a1",
                    writer_epoch=3,
                    one_phase=True,
                    candidates=[
                        r.AllocatedCandidate(
                            index=0,
                            event_id=event.event_id,
                            suid=suid,
                            tags=event.tags,
                            identity_digest="ab" * 32,
                        )
                    ],
                )
            ],
        ),
        r.TagDeliveryBatch(
            source_partition=1,
            sent_at=at,
            items=[
                r.TagDelivery(
                    **target,
                    action="PREPARE",
                    writer_epoch=3,
                    condition=condition,
                    event=event,
                    one_phase=True,
                )
            ],
        ),
        r.TagResolutionBatch(
            source_partition=3,
            observed_at=at,
            items=[
                r.TagResolution(
                    **target,
                    status="ABSENT_AND_IRREVOCABLY_FENCED",
                    tombstone_epoch=0,
                    rejection=error,
                )
            ],
        ),
        r.CommittedEvent(
            service_id="svc", suid=suid, allocator_lineage_id="lin-1", attempt_id="a1", event=event
        ),
        r.Certificate(
            certificate_version=1,
            authority="allocator-ledger",
            status="READY",
            allocator_lineage_id="lin-1",
            service_id="svc",
            closed_prefix_suid=suid,
            unresolved_count=0,
            generated_at=at,
            coverage=[r.PartitionOffset(partition=0, offset=42)],
        ),
        r.CommitResult(
            service_id="svc", attempt_id="a1", outcome="COMMITTED", suids=[suid], decided_at=at
        ),
        r.DeadLetter(
            service_id="svc",
            source_topic="dcb.commands",
            source_partition=1,
            source_offset=7,
            source_key=b"svc",
            source_value=b"\x00garbage",
            item_index=0,
            processor="ledger",
            error=error,
            failed_at=at,
        ),
        r.StoreLayout(tag_placement="SERVICE", partitions=6, tag_partitions=12, created_at=at),
    ]
