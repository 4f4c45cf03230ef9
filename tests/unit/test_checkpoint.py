"""What a round sends: batch records never split an attempt, and the group-member guard."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from streams.codec import AvroCodec, SchemaCatalog
from streams.kafka import checkpoint
from streams.kafka.checkpoint import Round, group_member
from streams.model.records import EventData, TagDelivery, TagDeliveryBatch

CODEC = AvroCodec(SchemaCatalog())
AT = datetime(2026, 12, 6, tzinfo=UTC)


def prepare(attempt: int, target: int, payload_bytes: int) -> TagDelivery:
    event = EventData(
        event_id=f"e{attempt}",
        event_type="T",
        payload='"' + "x" * payload_bytes + '"',
        tags=[f"t{target}"],
        timestamp=AT,
    )
    return TagDelivery(
        service_id="svc",
        tag=f"t{target}",
        allocator_lineage_id="L",
        attempt_id=f"a{attempt}",
        suid=f"{attempt:030d}",
        event_id=f"e{attempt}",
        identity_digest="d",
        action="PREPARE",
        writer_epoch=0,
        event=event,
        one_phase=True,
    )


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 40_000)), min_size=1, max_size=40))
def test_a_batch_record_is_split_between_groups_only_and_stays_under_the_bound(
    attempts: list[tuple[int, int]],
) -> None:
    checkpoint.MAX_RECORD_BYTES, bound = 64 * 1024, checkpoint.MAX_RECORD_BYTES
    try:
        groups = [
            [prepare(a, t, size) for t in range(targets)]
            for a, (targets, size) in enumerate(attempts)
        ]
        out = Round(CODEC)
        out.send_batch(
            "d",
            3,
            lambda items: TagDeliveryBatch(source_partition=0, sent_at=AT, items=items),
            groups,
        )
        records = [
            TagDeliveryBatch.from_avro(
                CODEC.decode(o.value or b"", TagDeliveryBatch.schema_name).value
            )
            for o in out.outputs
        ]
        assert all(o.partition == 3 for o in out.outputs)
        # every item once, in order, and an attempt's items always in one record
        assert [i for r in records for i in r.items] == [i for g in groups for i in g]
        for record in records:
            in_record = {i.attempt_id for i in record.items}
            assert all(
                len([i for g in groups for i in g if i.attempt_id == a])
                == len([i for i in record.items if i.attempt_id == a])
                for a in in_record
            )
        for output, record in zip(out.outputs, records, strict=True):
            assert (
                len(output.value or b"") <= 64 * 1024
                or len({i.attempt_id for i in record.items}) == 1
            )
    finally:
        checkpoint.MAX_RECORD_BYTES = bound


def test_the_group_member_is_read_from_librdkafkas_consumer_group_metadata() -> None:
    joined = b"CGMDv2:\x01\x00\x00\x00gcg-1\x00A-f30aeb54\x00\x01"
    assert group_member(joined) == (1, "A-f30aeb54")
    assert group_member(b"CGMDv2:\xff\xff\xff\xffx\x00\x00\x01") == (-1, "")
    assert group_member(b"CGMDv2:\x01\x00\x00\x00gcg-1\x00\x00\x01") == (1, "")
    assert group_member(b"something else") is None
    assert group_member("not bytes") is None
