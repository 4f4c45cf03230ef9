"""The commit path on the real broker: `dcb worker` processes, the SDK, an independent fold."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streams.codec import AvroCodec
from streams.errors import (
    AppendConditionFailed,
    ReservationExpiredError,
    StaleFenceError,
    TooManyTagsError,
)
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import (
    AppendCondition,
    Certificate,
    Command,
    CommitAttempt,
    DeadLetter,
    EventData,
    QueryItem,
)
from streams.sdk import DcbClient
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import produce_all, read_all
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


def registered(name: str, *extra_tags: str) -> EventData:
    return EventData(
        event_id=str(uuid.uuid4()),
        event_type="UserRegistered",
        payload=f'{{"name": "{name}"}}',
        tags=[f"username:{name}", *extra_tags],
        timestamp=datetime.now(UTC),
    )


def name_is_free(name: str, after: str | None = None) -> AppendCondition:
    query = [QueryItem(types=["UserRegistered"], tags=[f"username:{name}"])]
    return AppendCondition(fail_if_events_match=query, after=after)


def settled_certificate(client: DcbClient, timeout_s: float = 60) -> Certificate:
    """The certificate once nothing is unresolved (rejected attempts settle after their answer)."""
    deadline = time.monotonic() + timeout_s
    while True:
        certificate = client.certificate()
        if certificate is not None and certificate.unresolved_count == 0:
            return certificate
        assert time.monotonic() < deadline, f"never settled: {certificate}"
        time.sleep(0.2)


def test_append_read_certificate_and_a_failed_condition(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    with DcbClient(service_id="shop", settings=pipeline_settings, timeout_s=60) as client:
        assert client.certificate() is None
        first = client.append([registered("bob", "org:acme")], name_is_free("bob"))
        assert len(first.suids) == 1
        events = client.read([QueryItem(tags=["username:bob"])])
        assert [e.position for e in events] == first.suids
        assert events[0].event.tags == ["org:acme", "username:bob"]
        certificate = client.certificate()
        assert certificate is not None and certificate.status == "READY"
        assert certificate.closed_prefix_suid == first.suids[0]
        with pytest.raises(AppendConditionFailed) as info:
            client.append([registered("bob")], name_is_free("bob"))
        assert info.value.code == "append_condition_failed"
        assert info.value.details["conflictingSuid"] == first.suids[0]
        # the same condition after the position read succeeds (DCB optimistic locking)
        second = client.append([registered("bob")], name_is_free("bob", after=first.suids[0]))
        assert second.suids[0] > first.suids[0]
        assert [e.position for e in client.read([QueryItem(tags=["org:acme"])])] == first.suids
        with pytest.raises(TooManyTagsError):  # refused before anything is sent
            client.append([registered("x", *[f"t{i}" for i in range(40)])])


def test_no_user_name_is_taken_twice_under_concurrent_writers(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    names = [f"user{i}" for i in range(6)]
    claimed: list[tuple[str, str]] = []
    refused = Counter[str]()
    lock = threading.Lock()
    client = DcbClient(service_id="names", settings=pipeline_settings, timeout_s=90)

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        for name in rng.sample(names, len(names)):
            try:
                result = client.append([registered(name)], name_is_free(name))
            except AppendConditionFailed:
                with lock:
                    refused[name] += 1
                continue
            with lock:
                claimed.append((name, result.suids[0]))

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    try:
        log = client.read()
        certificate = settled_certificate(client)
    finally:
        client.close()
    # The independent fold: every name at most once in the whole log...
    taken = Counter(e.event.payload for e in log)
    assert all(count == 1 for count in taken.values()), taken
    # ...every acknowledged commit is in it, nothing else is, positions strictly increase.
    assert sorted(suid for _, suid in claimed) == [e.position for e in log]
    assert [e.position for e in log] == sorted({e.position for e in log})
    assert len(claimed) == len(names) and sum(refused.values()) == 8 * len(names) - len(names)
    # once everything settles, the prefix covers every event and the fenced attempts after it
    assert certificate.closed_prefix_suid is not None
    assert certificate.closed_prefix_suid >= log[-1].position


def test_bad_commands_go_to_dead_letters_and_the_next_commit_is_served(
    worker: WorkerProcess, pipeline_settings: DcbSettings, codec: AvroCodec
) -> None:
    settings = pipeline_settings
    too_many_tags = Command.model_construct(
        service_id="bad",
        command_id="c1",
        issued_at=datetime.now(UTC),
        kind="COMMIT",
        commit=CommitAttempt.model_construct(
            attempt_id="bad-1",
            writer_epoch=0,
            events=[registered("x", *[f"t{i}" for i in range(40)])],
            condition=None,
        ),
        reconcile=None,
    )
    produce_all(
        settings.resolved_bootstrap_servers,
        topic_name(settings.topics, TopicRole.COMMANDS),
        [
            (b"bad", b"not avro at all"),
            (b"bad", codec.encode(Command.schema_name, too_many_tags.to_avro())),
        ],
    )
    with DcbClient(service_id="bad", settings=settings, timeout_s=60) as client:
        good = client.append([registered("alice")])
        assert [e.position for e in client.read()] == good.suids
    letters = read_all(
        settings.resolved_bootstrap_servers,
        topic_name(settings.topics, TopicRole.DEAD_LETTERS),
        expect_at_least=2,
        timeout_s=60,
    )
    decoded = [
        DeadLetter.from_avro(codec.decode(m.value(), DeadLetter.schema_name).value) for m in letters
    ]
    assert sorted(d.error.code for d in decoded) == ["malformed_record", "too_many_tags"]
    assert {d.processor for d in decoded} == {"ledger"}
    assert all(d.source_value for d in decoded)


def test_kill_9_of_the_worker_under_load_loses_and_duplicates_nothing(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    client = DcbClient(service_id="load", settings=pipeline_settings, timeout_s=120)
    per_writer = 12

    def writer(n: int) -> None:
        for i in range(per_writer):
            event = registered(f"w{n}-{i}", f"writer:{n}")
            result = client.append([event])
            with lock:
                acknowledged.append((event.event_id, result.suids[0]))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < 20:
        threading.Event().wait(0.1)
    worker.kill()  # SIGKILL in the middle of the load: open transactions are never committed
    at_kill = len(acknowledged)
    worker.start()
    for thread in threads:
        thread.join(300)
    try:
        log = client.read()
    finally:
        client.close()
    assert at_kill < 8 * per_writer, "the load ended before the kill; nothing was tested"
    assert len(acknowledged) == 8 * per_writer
    # Nothing lost, nothing duplicated: the log is exactly the acknowledged commits.
    assert sorted(acknowledged, key=lambda a: a[1]) == [(e.event.event_id, e.position) for e in log]
    positions = [e.position for e in log]
    assert positions == sorted(set(positions))


def test_a_stale_writer_epoch_cannot_commit(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    with DcbClient(service_id="epochs", settings=pipeline_settings, writer_epoch=5) as current:
        committed = current.append([registered("new")])
        with DcbClient(service_id="epochs", settings=pipeline_settings, writer_epoch=3) as zombie:
            with pytest.raises(StaleFenceError) as info:
                zombie.append([registered("old")])
            assert info.value.code == "stale_fence"
        assert [e.position for e in current.read()] == committed.suids


def test_a_writer_dying_between_allocation_and_delivery_is_fenced_by_the_reconciler(
    pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    faulty = WorkerProcess(
        pipeline_settings,
        tmp_path,
        "faulty",
        grace_ms=2_000,
        env={"DCB_WORKER__FAULT_INJECTION": "after-allocation-before-delivery"},
    ).start()
    try:
        with DcbClient(service_id="faults", settings=pipeline_settings, timeout_s=60) as client:
            started = time.monotonic()
            with pytest.raises(ReservationExpiredError) as info:
                # its PREPARE to fault:lost is lost; username:zed gets one and reserves
                client.append([registered("zed", "fault:lost")], name_is_free("zed"))
            assert info.value.code == "reservation_expired"
            assert time.monotonic() - started >= 2.0  # not before the grace window
            # username:zed's reservation was fenced, not left to block: the name is free
            after = client.append([registered("zed")], name_is_free("zed"))
            log = client.read()
            assert [e.position for e in log] == after.suids
            assert not any("fault:lost" in e.event.tags for e in log)  # in all tags or none
            settled = settled_certificate(client)
            assert settled.closed_prefix_suid is not None
            assert settled.closed_prefix_suid >= after.suids[0]
    finally:
        faulty.stop()


def test_invoice_numbers_have_no_gap_and_no_duplicate_under_concurrent_writers(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    series = QueryItem(types=["InvoiceCreated"], tags=["invoices:2026"])
    client = DcbClient(service_id="billing", settings=pipeline_settings, timeout_s=90)

    def create_invoices(count: int) -> None:
        for _ in range(count):
            while True:
                seen = client.read([series])
                number = len(seen) + 1
                last = seen[-1].position if seen else None
                event = EventData(
                    event_id=str(uuid.uuid4()),
                    event_type="InvoiceCreated",
                    payload=f'{{"number": {number}}}',
                    tags=["invoices:2026", f"invoice:{uuid.uuid4().hex[:8]}"],
                    timestamp=datetime.now(UTC),
                )
                condition = AppendCondition(fail_if_events_match=[series], after=last)
                try:
                    client.append([event], condition)
                    break
                except AppendConditionFailed:
                    continue

    threads = [threading.Thread(target=create_invoices, args=(4,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    try:
        numbers = [json.loads(e.event.payload)["number"] for e in client.read([series])]
    finally:
        client.close()
    assert numbers == list(range(1, 33))  # in SUID order: consecutive, no gap, no repeat
