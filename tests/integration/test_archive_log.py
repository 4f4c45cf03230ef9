"""``dcb archive`` against the real broker: history moves into the archive, the hot log
drops only what every service on its partition has archived (and no projection still
needs), a crash between the two is retried, and readers see archive + log as one.

The oracle reads around the product: a raw read_committed consumer of ``dcb.events``
before anything is dropped is "the original"; after, the broker's log start offset says
what was dropped.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from streams.archive import DirectoryArchive
from streams.archive.history import history
from streams.kafka import clients
from streams.kafka.partitioner import key_partition
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import AppendCondition, QueryItem
from streams.projections.api import ProjectorRegistry, TagProjector
from streams.projections.checkpoint import Checkpoint
from streams.projections.exceptions import HistoryTruncatedError
from streams.projections.runner import (
    checkpoints_topic,
    ensure_projection_topics,
    rows_topic,
    run_projections,
)
from streams.sdk import DcbClient, Event
from streams.settings import DcbSettings
from tests.integration.cli import dcb, lifecycle_env
from tests.integration.oracle import read_to_end
from tests.integration.test_projections import committed_rows
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


def neighbours(settings: DcbSettings) -> tuple[str, str, int]:
    """Two service ids whose events share one partition of ``dcb.events``, and which."""
    partitions = settings.topics.partitions
    first = f"arch-{uuid.uuid4().hex[:8]}"
    target = key_partition(first.encode(), partitions)
    while True:
        other = f"arch-{uuid.uuid4().hex[:8]}"
        if key_partition(other.encode(), partitions) == target:
            return first, other, target


def subscribe(client: DcbClient, count: int, tag: str) -> list[str]:
    """``count`` subscriptions to one course, each guarded by the course's last event
    (the conditional workload: a read, then an append after what it saw)."""
    suids = []
    for n in range(count):
        query = [QueryItem(types=["Subscribed"], tags=[tag])]
        seen = client.read(query)
        condition = AppendCondition(fail_if_events_match=query, after=seen.head)
        result = client.append([Event("Subscribed", {"n": n}, [tag, f"student:{n}"])], condition)
        suids += result.suids
    return suids


def certified(client: DcbClient, suid: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        cert = client.certificate()
        if cert is not None and cert.closed_prefix_suid and cert.closed_prefix_suid >= suid:
            return cert.closed_prefix_suid
        assert time.monotonic() < deadline, f"{suid} never certified"
        time.sleep(0.2)


def log_start(settings: DcbSettings, partition: int) -> int:
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    consumer = clients.consumer(settings.resolved_bootstrap_servers, f"probe-{uuid.uuid4()}")
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[0]
    finally:
        consumer.close()


def raw(settings: DcbSettings, partition: int) -> list[tuple[int, bytes]]:
    """The partition as a raw read_committed consumer sees it: (offset, bytes)."""
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    return [
        (m.offset() or 0, m.value() or b"")
        for m in read_to_end(settings.resolved_bootstrap_servers, topic)
        if m.partition() == partition
    ]


def run_archive(settings: DcbSettings, *args: str, crash: bool = False) -> dict[str, Any]:
    env = lifecycle_env(settings)
    if crash:
        env["DCB_ARCHIVE__CRASH_AT"] = "after-append"
    done = dcb("archive", *args, "--json", env=env)
    if crash:
        assert done.exit_code == 70, done.stderr
        return {}
    assert done.exit_code == 0, done.stderr + done.stdout
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_archive_truncate_and_read_across_the_boundary(
    lifecycle_settings: DcbSettings, lifecycle_worker: WorkerProcess
) -> None:
    archived = lifecycle_settings
    a, b, partition = neighbours(archived)
    with (
        DcbClient(service_id=a, settings=archived) as client_a,
        DcbClient(service_id=b, settings=archived) as client_b,
    ):
        empty = DcbClient(service_id=a, settings=archived)  # its first read finds nothing
        assert list(empty.read()) == []
        first_a = subscribe(client_a, 12, "course:c1")
        early = DcbClient(service_id=a, settings=archived)  # reads now, and again at the end
        assert [e.position for e in early.read()] == first_a
        first_b = subscribe(client_b, 4, "course:c1")
        more_a = subscribe(client_a, 6, "course:c2")
        through_a = certified(client_a, more_a[-1])
        original = raw(archived, partition)  # before anything is dropped
        assert len(original) == 22
        offset_of_b = min(o for o, v in original if b.encode() in v)

        # A is archived; B, which shares the partition, is not: the log drops only A's
        # events below B's first.
        report = run_archive(archived, "--service", a, "--through", through_a)
        assert report["events"] == 18
        assert report["dropped"] == sum(1 for o, _ in original if o < offset_of_b)
        assert report["held_back_by"] == b
        assert log_start(archived, partition) == offset_of_b
        assert run_archive(archived, "audit", "--service", a)["archived_events"] == 18

        # B is archived too; A appends more meanwhile. Now the log drops up to A's new
        # events, which are not archived yet.
        late_a = subscribe(client_a, 3, "course:c2")
        through_b = certified(client_b, first_b[-1])
        before_b = raw(archived, partition)
        report = run_archive(archived, "--service", b, "--through", through_b)
        first_late = min(o for o, v in before_b if any(s.encode() in v for s in late_a))
        assert log_start(archived, partition) == first_late
        assert report["held_back_by"] == a

        # A crash between the archive append and the truncation: the retry appends
        # nothing new and drops what the crashed run did not.
        through_late = certified(client_a, late_a[-1])
        run_archive(archived, "--service", a, "--through", through_late, crash=True)
        store = DirectoryArchive(archived.archive.folder(archived.broker.cache_dir))
        assert store.headers(a)[-1].through_suid == through_late
        assert log_start(archived, partition) == first_late  # nothing dropped yet
        retry = run_archive(archived, "--service", a, "--through", through_late)
        assert retry["events"] == 0 and retry["segments"] == 0
        assert log_start(archived, partition) > first_late

        # Archive and log read as one: byte for byte what the log held.
        whole_original = original + [(o, v) for o, v in before_b if o > original[-1][0]]
        for service in (a, b):
            expected = [v for _, v in whole_original if service.encode() in v]
            assert [r.value for r in history(archived, store, service)] == expected
            audit = run_archive(archived, "audit", "--service", service)
            assert audit["archived_events"] == len(expected)

        # Clients read every event, in SUID order, nothing twice: one that kept reading,
        # one that stopped early and finds the log has dropped what it had yet to read
        # (it takes those from the archive), one started after everything, and one whose
        # only read came before any event.
        fresh = DcbClient(service_id=a, settings=archived)
        for reader in (client_a, early, fresh, empty):
            assert [e.position for e in reader.read()] == first_a + more_a + late_a
        for reader in (fresh, early, empty):
            reader.close()
        assert first_b == [e.position for e in client_b.read()]


def test_only_a_certified_suid_is_archived(
    lifecycle_settings: DcbSettings, lifecycle_worker: WorkerProcess
) -> None:
    archived = lifecycle_settings
    a, _, _ = neighbours(archived)
    with DcbClient(service_id=a, settings=archived) as client:
        suids = subscribe(client, 2, "course:c1")
        prefix = certified(client, suids[-1])
    beyond = str(int(prefix) + 10**12).zfill(30)
    env = lifecycle_env(archived)
    done = dcb("archive", "--service", a, "--through", beyond, "--json", env=env)
    assert done.exit_code == 1
    assert json.loads(done.stdout)["error"]["code"] == "archive_not_certified"
    store = DirectoryArchive(archived.archive.folder(archived.broker.cache_dir))
    assert store.headers(a) == []


def _lagging_checkpoint(settings: DcbSettings, partition: int, offset: int) -> None:
    """What a projection that has read ``partition`` up to ``offset`` leaves behind."""
    ensure_projection_topics(settings, ["lagging"])
    producer = clients.producer(settings.resolved_bootstrap_servers)
    checkpoint = Checkpoint(projection_id="lagging", events_offsets={partition: offset})
    producer.produce(
        checkpoints_topic(settings), key=b"lagging", value=checkpoint.model_dump_json().encode()
    )
    producer.flush(10)


def test_the_log_keeps_what_a_projection_has_yet_to_read_and_a_new_one_reads_the_archive(
    lifecycle_settings: DcbSettings, lifecycle_worker: WorkerProcess, tmp_path: Path
) -> None:
    settings = lifecycle_settings
    a, _, partition = neighbours(settings)
    with DcbClient(service_id=a, settings=settings) as client:
        suids = subscribe(client, 6, "course:c1")
        through = certified(client, suids[-1])
        offsets = [o for o, _ in raw(settings, partition)]
        _lagging_checkpoint(settings, partition, offsets[3])
        report = run_archive(settings, "--service", a, "--through", through)
        assert report["events"] == 6 and report["held_back_by"] == "projection lagging"
        assert log_start(settings, partition) == offsets[3]
        _lagging_checkpoint(settings, partition, offsets[-1] + 2)  # it caught up
        run_archive(settings, "--service", a, "--through", through)
        assert log_start(settings, partition) > offsets[-1]
        later = subscribe(client, 2, "course:c1")  # in the log only
        certified(client, later[-1])

    # A projection started now folds the archived history, then the log, in SUID order.
    rosters = folds_whole(settings, "late", 8, later[-1])

    # Without the archive (another folder), the hole cannot be filled: it stops.
    elsewhere = settings.archive.model_copy(update={"dir": tmp_path / "empty-archive"})
    blind = settings.model_copy(update={"archive": elsewhere})
    other = TagProjector(
        id=f"blind-{uuid.uuid4().hex[:6]}",
        query=rosters.query,
        tag_prefix="course:",
        fold=rosters.fold,
    )
    with pytest.raises(HistoryTruncatedError):
        run_until(blind, other, lambda rows: False)


def folds_whole(settings: DcbSettings, name: str, events: int, last: str) -> TagProjector:
    """A new projection of course c1 whose one row counts ``events``, the last ``last``."""
    rosters = TagProjector(
        id=f"{name}-{uuid.uuid4().hex[:6]}",
        query=(QueryItem(tags=["course:c1"]),),
        tag_prefix="course:",
        fold=lambda row, event: {"n": row.get("n", 0) + 1, "last": event.position},
    )
    assert run_until(settings, rosters, lambda rows: any(r["n"] == events for r in rows.values()))
    (row,) = committed_rows(settings, rosters.id).values()
    assert row == {"n": events, "last": last}
    return rosters


def run_until(
    settings: DcbSettings,
    projector: TagProjector,
    done: Callable[[dict[str, dict[str, Any]]], bool],
    timeout_s: float = 60,
) -> bool:
    """Run ``projector`` until its committed rows satisfy ``done``; what it raised, raised."""
    failure: list[BaseException] = []
    stop = threading.Event()
    port0 = settings.projections.model_copy(update={"http_port": 0})

    def run() -> None:
        try:
            run_projections(
                ProjectorRegistry([projector]),
                settings.model_copy(update={"projections": port0}),
                stop,
            )
        except BaseException as exc:
            failure.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not failure and time.monotonic() < deadline:
            ready = runner.is_alive() and _has_rows_topic(settings, projector.id)
            if ready and done(committed_rows(settings, projector.id)):
                return True
            time.sleep(0.5)
    finally:
        stop.set()
        runner.join(30)
    if failure:
        raise failure[0]
    return False


def _has_rows_topic(settings: DcbSettings, projection_id: str) -> bool:
    topics = clients.admin(settings.kafka).list_topics(timeout=10).topics
    return rows_topic(settings, projection_id) in topics


def set_events_config(settings: DcbSettings, **config: int) -> None:
    """What an operator does to bound the hot log (``retention_ms``: the broker deletes
    segments, the active one too, whose records are all older than that)."""
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    entries = [
        ConfigEntry(name.replace("_", "."), str(value), incremental_operation=AlterConfigOpType.SET)
        for name, value in config.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = clients.admin(settings.kafka)  # must outlive its futures
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_the_brokers_retention_drops_archived_history_and_readers_fill_it_from_the_archive(
    lifecycle_settings: DcbSettings, lifecycle_worker: WorkerProcess
) -> None:
    """Bounded retention on dcb.events deletes history behind dcb archive's back (here past
    a projection's checkpoint, which dcb archive itself never cuts); readers then take
    the dropped part from the archive."""
    settings = lifecycle_settings
    a, _, partition = neighbours(settings)
    with DcbClient(service_id=a, settings=settings) as client:
        first = subscribe(client, 6, "course:c1")
        through = certified(client, first[-1])
        original = raw(settings, partition)
        _lagging_checkpoint(settings, partition, 0)  # dcb archive cuts nothing then
        report = run_archive(settings, "--service", a, "--through", through)
        assert report["events"] == 6 and report["dropped"] == 0
        # Retention bounded until the six are gone (and lifted before anything new can age).
        set_events_config(settings, retention_ms=3_000, segment_ms=500)
        deadline = time.monotonic() + 60
        while log_start(settings, partition) <= original[-1][0]:
            assert time.monotonic() < deadline, "the broker's retention deleted nothing"
            time.sleep(0.2)
        set_events_config(settings, retention_ms=-1)
        events = [Event("Subscribed", {"n": n}, ["course:c1", f"student:{n}"]) for n in (6, 7)]
        later = client.append(events).suids
        certified(client, later[-1])
    kept = [o for o, _ in raw(settings, partition)]
    assert kept and min(kept) > original[-1][0], kept

    # A fresh client, the audit and a new projection see the whole history.
    with DcbClient(service_id=a, settings=settings) as fresh:
        assert [e.position for e in fresh.read()] == [*first, *later]
    assert run_archive(settings, "audit", "--service", a)["archived_events"] == 6
    folds_whole(settings, "kept", 8, later[-1])
