"""confluent-kafka against the real broker: round trips, consume-transform-produce
transactions, and consumer groups."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import KafkaException, TopicPartition

from streams.codec import AvroCodec
from streams.errors import CodecError
from streams.kafka import clients
from streams.kafka.partitioner import key_partition
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import RECORD_TYPES, topic_specs
from streams.model.records import Command, CommitResult
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import create_topic, produce_all, read_all
from tests.strategies import samples

pytestmark = pytest.mark.integration


def test_every_topic_record_round_trips_through_its_topic(
    settings: DcbSettings, codec: AvroCodec
) -> None:
    bootstrap = settings.resolved_bootstrap_servers
    specs = topic_specs(settings.topics)
    ensure_topics(clients.admin(bootstrap), specs)
    by_type = {RECORD_TYPES[s.role]: s for s in specs}
    records = samples()
    for rec in records:
        spec = by_type[type(rec)]
        produce_all(bootstrap, spec.name, [(b"svc", codec.encode(rec.schema_name, rec.to_avro()))])
    for spec in specs:
        expected = [rec for rec in records if type(rec) is RECORD_TYPES[spec.role]]
        got = read_all(bootstrap, spec.name, expect_at_least=len(expected), settle_s=0.5)
        decoded = [
            RECORD_TYPES[spec.role].from_avro(codec.decode(m.value(), spec.schema_name).value)
            for m in got
        ]
        assert sorted(decoded, key=repr) == sorted(expected, key=repr)


def _results(n: int, prefix: str) -> list[CommitResult]:
    base = samples()[7].to_avro()
    return [CommitResult.from_avro({**base, "attemptId": f"{prefix}-{i:03d}"}) for i in range(n)]


def test_aborted_transaction_is_invisible_and_committed_one_visible_exactly_once(
    bootstrap_servers: str, topic_prefix: str, codec: AvroCodec
) -> None:
    """Consume-transform-produce with offsets in the transaction. The first pass over the
    input is aborted after producing everything; the retry commits. read_committed sees
    each output once; read_uncommitted also sees the aborted copies."""
    src, dst, group = f"{topic_prefix}in", f"{topic_prefix}out", f"{topic_prefix}ctp"
    create_topic(bootstrap_servers, src, partitions=2)
    create_topic(bootstrap_servers, dst, partitions=2)
    inputs = _results(30, "attempt")
    produce_all(
        bootstrap_servers,
        src,
        [(r.attempt_id.encode(), codec.encode(r.schema_name, r.to_avro())) for r in inputs],
    )

    producer = clients.transactional_producer(bootstrap_servers, f"{topic_prefix}ctp-tx")

    def one_pass(*, commit: bool) -> int:
        consumer = clients.consumer(bootstrap_servers, group)
        consumer.subscribe([src])
        producer.begin_transaction()
        moved = 0
        deadline = time.monotonic() + 30
        while moved < len(inputs) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            rec = CommitResult.from_avro(codec.decode(msg.value(), CommitResult.schema_name).value)
            out = rec.model_copy(update={"suids": [f"{moved:030d}"]})
            producer.produce(dst, key=msg.key(), value=codec.encode(out.schema_name, out.to_avro()))
            moved += 1
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        )
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the aborted records really are on the broker
            producer.abort_transaction(30)
        consumer.close()
        return moved

    assert one_pass(commit=False) == len(inputs)
    assert read_all(bootstrap_servers, dst, expect_at_least=0, settle_s=1) == []
    assert one_pass(commit=True) == len(inputs)  # offsets were aborted too: all redone

    committed = read_all(bootstrap_servers, dst, expect_at_least=len(inputs))
    seen = Counter(
        CommitResult.from_avro(codec.decode(m.value()).value).attempt_id for m in committed
    )
    assert seen == Counter(r.attempt_id for r in inputs)
    uncommitted = read_all(
        bootstrap_servers, dst, expect_at_least=2 * len(inputs), read_committed=False, settle_s=1
    )
    assert len(uncommitted) == 2 * len(inputs)


def test_zombie_producer_is_fenced_by_transactional_id(
    bootstrap_servers: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}fenced"
    create_topic(bootstrap_servers, topic)
    tid = f"{topic_prefix}same-id"
    zombie = clients.transactional_producer(bootstrap_servers, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    successor = clients.transactional_producer(bootstrap_servers, tid)  # fences the zombie
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    assert info.value.args[0].fatal() or info.value.args[0].txn_requires_abort()
    values = [m.value() for m in read_all(bootstrap_servers, topic, expect_at_least=1)]
    assert values == [b"successor"]


def test_consumer_group_splits_partitions_and_resumes_from_committed_offsets(
    bootstrap_servers: str, topic_prefix: str
) -> None:
    topic, group = f"{topic_prefix}grouped", f"{topic_prefix}group"
    create_topic(bootstrap_servers, topic, partitions=4)
    first_batch = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)]
    produce_all(bootstrap_servers, topic, first_batch)

    a = clients.consumer(bootstrap_servers, group)
    b = clients.consumer(bootstrap_servers, group)
    a.subscribe([topic])
    b.subscribe([topic])
    seen: dict[str, list[bytes]] = {"a": [], "b": []}
    deadline = time.monotonic() + 60
    while (
        sum(len(v) for v in seen.values()) < len(first_batch)
        or not (a.assignment() and b.assignment())
    ) and time.monotonic() < deadline:
        for name, consumer in (("a", a), ("b", b)):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen[name].append(msg.value() or b"")
                consumer.commit(message=msg, asynchronous=False)
    parts_a = {tp.partition for tp in a.assignment()}
    parts_b = {tp.partition for tp in b.assignment()}
    assert parts_a and parts_b, "both members got partitions"
    assert parts_a.isdisjoint(parts_b) and parts_a | parts_b == {0, 1, 2, 3}
    assert sorted(seen["a"] + seen["b"]) == sorted(v for _, v in first_batch)

    a.close()  # leaves the group; b takes over a's partitions at their committed offsets
    second_batch = [(f"k{i}".encode(), f"w{i}".encode()) for i in range(40)]
    produce_all(bootstrap_servers, topic, second_batch)
    resumed: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(resumed) < len(second_batch) and time.monotonic() < deadline:
        msg = b.poll(0.2)
        if msg is not None and not msg.error():
            resumed.append(msg.value() or b"")
            b.commit(message=msg, asynchronous=False)
    extra = b.poll(2.0)
    assert {tp.partition for tp in b.assignment()} == {0, 1, 2, 3}
    assert sorted(resumed) == sorted(v for _, v in second_batch), "nothing re-read, none lost"
    assert extra is None
    b.close()

    committed = clients.consumer(bootstrap_servers, group).committed(
        [TopicPartition(topic, p) for p in range(4)], timeout=10
    )
    assert sum(tp.offset for tp in committed) == len(first_batch) + len(second_batch)


def test_readiness_probe_tells_a_broker_from_a_closed_port(bootstrap_servers: str) -> None:
    assert clients.broker_answers(bootstrap_servers)
    assert not clients.broker_answers("127.0.0.1:1", timeout_s=1)


def test_wrong_schema_bytes_on_a_topic_give_typed_errors(
    settings: DcbSettings, codec: AvroCodec
) -> None:
    bootstrap = settings.resolved_bootstrap_servers
    specs = {s.role.value: s for s in topic_specs(settings.topics)}
    ensure_topics(clients.admin(bootstrap), list(specs.values()))
    commands = specs["commands"]
    command, certificate = samples()[0], samples()[6]
    assert isinstance(command, Command)
    produce_all(
        bootstrap,
        commands.name,
        [
            (b"svc", b'{"serviceId": "svc", "kind": "COMMIT"}'),  # JSON, not Avro
            (b"svc", b"\xc3\x01" + b"\xee" * 8 + b"\x02"),  # unknown fingerprint
            (b"svc", codec.encode(certificate.schema_name, certificate.to_avro())),
            (b"svc", codec.encode(command.schema_name, command.to_avro())),
        ],
    )
    outcomes: list[str] = []
    found = read_all(bootstrap, commands.name, expect_at_least=4)
    for msg in sorted(found, key=lambda m: m.offset() or 0):
        try:
            decoded = codec.decode(msg.value(), expected=commands.schema_name)
            outcomes.append(type(command).from_avro(decoded.value).command_id)
        except CodecError as exc:
            outcomes.append(exc.code)
    assert outcomes == ["malformed_record", "unknown_schema", "unexpected_schema", "a1"]


def test_producers_put_a_key_where_key_partition_says(
    settings: DcbSettings, topic_prefix: str
) -> None:
    """The SDK reads one service's partition only: the producers must agree on where it is."""
    bootstrap = settings.resolved_bootstrap_servers
    topic = f"{topic_prefix}keyed"
    create_topic(bootstrap, topic, partitions=6)
    keys = [f"service-{i}".encode() for i in range(40)]
    produce_all(bootstrap, topic, [(key, b"x") for key in keys])
    got = read_all(bootstrap, topic, expect_at_least=len(keys), settle_s=0.5)
    assert sorted((m.key() or b"", m.partition()) for m in got) == sorted(
        (key, key_partition(key, 6)) for key in keys
    )
