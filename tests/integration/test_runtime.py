"""The runtime's exactly-once pieces on the real broker: fencing by the group, and where a
restore stops. (The crash tests show the same end to end, with the commit path.)"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streams.bench.cpu import cpu_seconds
from streams.codec import AvroCodec
from streams.errors import WorkerStalledError
from streams.kafka import changelog, clients
from streams.kafka.checkpoint import Checkpoint, Output, Round, RoundAbortedError
from streams.kafka.end_offsets import EndOffsets
from streams.kafka.runtime import transactional_ids
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import create_topic, read_all
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


def transactional(bootstrap: str) -> Producer:
    return clients.transactional_producer(bootstrap, f"test-{uuid.uuid4()}")


def joined(bootstrap: str, group: str, topic: str, **overrides: object) -> Consumer:
    """A member of ``group`` on ``topic``, once it has its partitions."""
    member = clients.group_consumer(bootstrap, group, **overrides)
    member.subscribe([topic])
    deadline = time.monotonic() + 30
    while not member.assignment():
        assert time.monotonic() < deadline, "never assigned"
        member.poll(0.2)
    return member


def test_rounds_take_turns_on_two_producers_in_order_and_a_restart_aborts_both(
    bootstrap_servers: str, topic_prefix: str, codec: AvroCodec
) -> None:
    """Rounds back to back, each begun once the one before committed, alternate between
    the worker's two producers: every round's record follows the last round's on the
    partition, and the offsets committed last are the last round's (the group keeps a
    producer's offsets only when they are newer than what it has). A worker restarted
    with the same ids aborts what either producer left open: readers are not held up."""
    source, sink = f"{topic_prefix}in", f"{topic_prefix}out"
    create_topic(bootstrap_servers, source)
    create_topic(bootstrap_servers, sink)
    member = joined(bootstrap_servers, f"{topic_prefix}group", source)
    ids = transactional_ids(f"{topic_prefix}worker", "0")
    producers = [clients.transactional_producer(bootstrap_servers, t) for t in ids]
    checkpoint = Checkpoint(producers, member, [], 10, 5)
    offsets: list[int] = []
    turns = []
    for n in range(20):
        out = Round(codec)
        out.outputs.append(Output(sink, b"k", b"%d" % n, 0, lambda _p, o: offsets.append(o)))
        committing = checkpoint.begin(out, [TopicPartition(source, 0, n + 1)])
        committing.settle()
        turns.append(producers.index(committing.producer))
    assert turns == [0, 1] * 10
    assert offsets == sorted(offsets) and len(set(offsets)) == 20
    committed = read_all(bootstrap_servers, sink, expect_at_least=20, settle_s=0.5)
    assert [m.value() for m in committed] == [b"%d" % n for n in range(20)]
    assert [tp.offset for tp in member.committed([TopicPartition(source, 0)], 10)] == [20]

    for producer in producers:  # both die inside a transaction
        producer.begin_transaction()
        producer.produce(sink, key=b"k", value=b"left open", partition=0)
        producer.flush(10)
    ends = EndOffsets(bootstrap_servers)
    written = ends.latest([(sink, 0)], committed=False)[sink, 0]
    assert ends.latest([(sink, 0)], committed=True)[sink, 0] < written  # held up
    for transactional_id in ids:  # the restart: init_transactions fences and aborts
        clients.transactional_producer(bootstrap_servers, transactional_id)
    assert ends.latest([(sink, 0)], committed=True)[sink, 0] >= written
    member.close()


def test_a_round_of_a_member_the_group_let_go_never_becomes_visible(
    bootstrap_servers: str, topic_prefix: str, codec: AvroCodec
) -> None:
    """A member that stopped polling past ``max.poll.interval.ms`` is out of the group;
    librdkafka then hands out metadata without a member id, which Kafka would take
    unchecked. Its round is aborted: nothing of it is ever readable committed."""
    source, sink = f"{topic_prefix}in", f"{topic_prefix}out"
    create_topic(bootstrap_servers, source, partitions=2)
    create_topic(bootstrap_servers, sink)
    member = joined(
        bootstrap_servers,
        f"{topic_prefix}group",
        source,
        **{"max.poll.interval.ms": 6000, "session.timeout.ms": 6000},
    )
    checkpoint = Checkpoint([transactional(bootstrap_servers)], member, [], 10, 5)
    offsets = [TopicPartition(source, p, 0) for p in (0, 1)]
    live = Round(codec)
    live.outputs.append(Output(sink, b"k", b"while a member"))
    checkpoint.commit(live, offsets)
    time.sleep(9)  # no poll: the member leaves the group
    zombie = Round(codec)
    zombie.outputs.append(Output(sink, b"k", b"after it left"))
    with pytest.raises(RoundAbortedError, match="no member of the group"):
        checkpoint.commit(zombie, offsets)
    committed = read_all(bootstrap_servers, sink, expect_at_least=1, settle_s=1)
    assert [m.value() for m in committed] == [b"while a member"]
    late = Round(codec)
    late.outputs.append(Output(sink, b"k", b"late"))
    with pytest.raises(RoundAbortedError, match="took"):  # began too long ago to be trusted
        checkpoint.commit(late, offsets, started_at=time.monotonic() - 6)
    member.close()


def test_a_restore_waits_for_a_transaction_still_open_on_its_changelog(
    bootstrap_servers: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}table-changelog"
    create_topic(bootstrap_servers, topic, partitions=1, **{"cleanup.policy": "compact"})
    done = transactional(bootstrap_servers)
    done.begin_transaction()
    done.produce(topic, key=b"a", value=b"1", partition=0)
    done.produce(topic, key=b"gone", value=b"x", partition=0)
    done.produce(topic, key=b"gone", value=None, partition=0)  # a tombstone
    done.commit_transaction(10)
    still_open = transactional(bootstrap_servers)
    still_open.begin_transaction()
    still_open.produce(topic, key=b"b", value=b"2", partition=0)
    still_open.flush(10)
    started = time.monotonic()
    with pytest.raises(WorkerStalledError) as stalled:
        changelog.restore(
            bootstrap_servers, f"{topic_prefix}restore", [(topic, 0)], stall_timeout_s=3
        )
    assert time.monotonic() - started >= 3 and stalled.value.code == "worker_stalled"
    still_open.commit_transaction(10)
    rows = changelog.restore(
        bootstrap_servers, f"{topic_prefix}restore", [(topic, 0)], stall_timeout_s=10
    )
    assert rows == {(topic, 0): {"a": b"1", "b": b"2"}}


def test_an_idle_worker_waits_instead_of_spinning(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    """A worker with nothing to do waits in poll (its clock ticks once a second): a loop
    that polled without waiting used a whole core before anything had arrived."""
    pid = worker.child_pid()
    assert pid is not None
    time.sleep(2)  # past the start-up
    before, started = cpu_seconds([pid]), time.monotonic()
    time.sleep(5)
    cores = (cpu_seconds([pid]) - before) / (time.monotonic() - started)
    assert cores < 0.2, f"an idle worker used {cores:.2f} of a core"
