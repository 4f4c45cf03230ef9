"""``dcb project`` on the real broker: gated on certificates, exactly once across kill -9.

The oracle reads around the product: a raw ``read_committed`` consumer to the high
watermark of ``dcb.events`` and of the projection's own topics, and a fold written here
(not the projector's). A sample is the rows and checkpoint as committed together.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from streams.codec import AvroCodec, SchemaCatalog
from streams.infra.ports import free_port
from streams.infra.worker_process import worker_env
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicRole, topic_name, topic_specs
from streams.model.records import Certificate, CommittedEvent, PartitionOffset
from streams.model.suid import format_suid, ticks
from streams.projections.api import ProjectedEvent, ProjectorRegistry, Row, ServiceProjector
from streams.projections.checkpoint import Checkpoint
from streams.projections.row_format import decode_key, decode_value
from streams.projections.runner import checkpoints_topic, rows_topic, run_projections
from streams.sdk import DcbClient
from streams.settings import DcbSettings
from tests.integration.cli import dcb
from tests.integration.load import Subscriptions, subscription
from tests.integration.metrics import samples
from tests.integration.oracle import Logged, committed_events, read_to_end
from tests.integration.workers import WorkerProcess

APP = "streams.demo.projections:registry"
ROSTERS = "course-rosters"


class Runner:
    """``dcb project`` as a child process, one log per start."""

    def __init__(self, settings: DcbSettings, workdir: Path, app: str = APP) -> None:
        self.settings, self.workdir, self.app, self.runs = settings, workdir, app, 0
        self.http_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, crash_at: str | None = None) -> Runner:
        self.runs += 1
        env = {**os.environ, **worker_env(self.settings)}
        env["DCB_PROJECTIONS__CHECKPOINT_INTERVAL_S"] = "0.2"
        env["DCB_PROJECTIONS__HTTP_PORT"] = str(self.http_port)
        if crash_at:
            env["DCB_PROJECTIONS__CRASH_AT"] = crash_at
        log = (self.workdir / f"project-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streams", "-v", "project", "--app", self.app],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        return self

    def log(self) -> str:
        return (self.workdir / f"project-{self.runs}.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def last_checkpoint(settings: DcbSettings, projection_id: str) -> Checkpoint:
    found = [
        m
        for m in read_to_end(settings.kafka, checkpoints_topic(settings))
        if m.key() == projection_id.encode()
    ]
    if not found or found[-1].value() is None:
        return Checkpoint(projection_id=projection_id)
    return Checkpoint.model_validate_json(found[-1].value() or b"")


def committed_rows(settings: DcbSettings, projection_id: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    # To the stable end: a runner's round (rows, then its checkpoint) still producing
    # would otherwise be read in part, rows matching no checkpoint (seen once on a slow
    # day: "rows match no fold").
    for m in read_to_end(settings.kafka, rows_topic(settings, projection_id), stable=True):
        key = decode_key(m.key() or b"")
        if m.value() is None:
            rows.pop(key, None)
        else:
            rows[key] = decode_value(m.value() or b"")
    return rows


def sample(
    settings: DcbSettings, projection_id: str
) -> tuple[Checkpoint, dict[str, dict[str, Any]], Checkpoint]:
    """The checkpoint, the rows, the checkpoint again: the rows are those of a checkpoint
    between the two (rows and checkpoint are committed in one transaction)."""
    before = last_checkpoint(settings, projection_id)
    rows = committed_rows(settings, projection_id)
    return before, rows, last_checkpoint(settings, projection_id)


def fold_rosters(log: list[Logged], through: dict[str, str | None]) -> dict[str, dict[str, Any]]:
    """The course rosters from every committed subscription at or below ``through``."""
    rows: dict[str, dict[str, Any]] = {}
    for e in sorted(log, key=lambda e: (e.service, e.suid)):
        upto = through.get(e.service)
        if e.event_type != "StudentSubscribed" or upto is None or e.suid > upto:
            continue
        row = rows.setdefault(f"{e.service}/course:{e.body['course']}", {"students": []})
        row["students"].append(e.body["student"])
        row.update(course=e.body["course"], last_position=e.suid)
    return rows


def applied_through(checkpoint: Checkpoint) -> dict[str, str | None]:
    return {s: m.applied_through for s, m in checkpoint.services.items()}


def wait_caught_up(
    settings: DcbSettings, runner: Runner, timeout_s: float = 120, projection_id: str = ROSTERS
) -> None:
    """Until the checkpoint has applied every committed event (the load has stopped)."""
    newest: dict[str, str] = defaultdict(str)
    for e in committed_events(settings):
        newest[e.service] = max(newest[e.service], e.suid)
    deadline = time.monotonic() + timeout_s
    while True:
        through = applied_through(last_checkpoint(settings, projection_id))
        if all((through.get(s) or "") >= suid for s, suid in newest.items()):
            return
        assert runner.proc is not None and runner.proc.poll() is None, runner.log()[-3000:]
        assert time.monotonic() < deadline, f"not caught up: {through} < {dict(newest)}"
        time.sleep(0.5)


def check_sample(settings: DcbSettings) -> Checkpoint:
    """The committed rows equal the independent fold of the log up to the checkpoint they
    were committed with: per service, some applied point between the two reads of it."""
    before, rows, after = sample(settings, ROSTERS)
    log = committed_events(settings)
    low, high = applied_through(before), applied_through(after)
    for service in high:
        mine = {k: v for k, v in rows.items() if k.startswith(f"{service}/")}
        lo, hi = low.get(service), high[service] or ""
        between = sorted(e.suid for e in log if e.service == service and (lo or "") < e.suid <= hi)
        points = [lo, *between]
        folds = [fold_rosters(log, {service: p}) for p in points]
        assert mine in folds, f"{service}: rows match no fold between {points[0]} and {points[-1]}"
    assert not [k for k in rows if k.split("/")[0] not in high]
    return after


def finish(settings: DcbSettings, load: Subscriptions, runner: Runner) -> None:
    """Stop the load; once the runner has caught up, its rows are the fold of the whole
    log, and it applied each committed event once (the count says so, the rows too)."""
    load.stop()
    load.join(60)
    wait_caught_up(settings, runner)
    assert check_sample(settings).applied == len(committed_events(settings))


@pytest.fixture
def services(pipeline_settings: DcbSettings) -> Iterator[list[DcbClient]]:
    first = DcbClient(service_id=f"a{uuid.uuid4().hex[:6]}", settings=pipeline_settings)
    clients_ = [first, first.for_service(f"b{uuid.uuid4().hex[:6]}")]
    yield clients_
    for c in reversed(clients_):
        c.close()


def test_the_gated_runner_equals_the_fold_of_the_log_at_every_sample(
    pipeline_settings: DcbSettings, worker: WorkerProcess, services: list[DcbClient], tmp_path: Path
) -> None:
    runner = Runner(pipeline_settings, tmp_path).start()
    load = Subscriptions(services, writers=4)
    try:
        applied: list[int] = []
        deadline = time.monotonic() + 120
        while len(set(applied)) < 4:  # four samples, each further on, under load
            assert time.monotonic() < deadline, f"the projection did not move: {applied}"
            applied.append(check_sample(pipeline_settings).applied)
            time.sleep(0.5)
        finish(pipeline_settings, load, runner)
    finally:
        load.stop()
        runner.stop()
    assert runner.proc is not None and runner.proc.returncode == 0, runner.log()[-3000:]


@pytest.mark.parametrize(
    "point", ["before-rows", "mid-rows", "before-checkpoint", "before-commit", "after-commit"]
)
def test_kill_9_at_each_crash_point_applies_every_event_once(
    settings: DcbSettings, tmp_path: Path, point: str
) -> None:
    ensure_topics(clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics))
    worker = WorkerProcess(settings, tmp_path, "worker", grace_ms=3_000).start()
    runner = Runner(settings, tmp_path)
    with DcbClient(service_id="courses", settings=settings) as client:
        load = Subscriptions([client], writers=3)
        try:
            load.wait_for(10)
            runner.start(crash_at=f"{point}@3")  # the third commit, with events flowing
            assert runner.proc is not None
            assert runner.proc.wait(120) == -signal.SIGKILL, runner.log()[-3000:]
            assert f"crash point {point} reached" in runner.log()
            died_at = len(load.committed())
            runner.start()
            load.wait_for(died_at + 10)  # the projection restarts under load
            finish(settings, load, runner)
            if point == "mid-rows":  # the killed transaction's rows: on the broker, aborted
                rows = rows_topic(settings, ROSTERS)
                bootstrap = settings.resolved_bootstrap_servers
                seen_raw = read_to_end(bootstrap, rows, read_committed=False)
                assert len(seen_raw) > len(read_to_end(bootstrap, rows))
        finally:
            load.stop()
            runner.stop()
            worker.stop()


def _event(service: str, n: int, lineage: str) -> CommittedEvent:
    e = subscription(f"s{n}", "c1")
    return CommittedEvent(
        service_id=service,
        suid=format_suid(ticks(datetime.now(UTC)) * 10**11 + n),
        allocator_lineage_id=lineage,
        attempt_id=f"a{n}",
        event=e,
    )


class HandWritten:
    """Five events of service ``shop`` written straight to ``dcb.events``; certificates,
    good or not, written by :meth:`certify`."""

    def __init__(self, settings: DcbSettings) -> None:
        bootstrap = settings.resolved_bootstrap_servers
        ensure_topics(clients.admin(bootstrap), topic_specs(settings.topics))
        self.codec = AvroCodec(SchemaCatalog())
        self.producer = clients.producer(bootstrap)
        self.certificates_topic = topic_name(settings.topics, TopicRole.CERTIFICATES)
        events_topic = topic_name(settings.topics, TopicRole.EVENTS)
        self.events = [_event("shop", n, "lineage-1") for n in range(5)]
        for e in self.events:
            value = self.codec.encode(e.schema_name, e.to_avro())
            self.producer.produce(events_topic, key=b"shop", value=value)
            self.producer.flush(10)
        written = read_to_end(bootstrap, events_topic)
        self.partition = written[0].partition() or 0
        self.ends = [(m.offset() or 0) + 1 for m in written]

    def certify(self, upto: int, key: bytes = b"shop", **changes: object) -> None:
        fields: dict[str, object] = {
            "certificate_version": 1,
            "authority": "test",
            "status": "READY",
            "allocator_lineage_id": "lineage-1",
            "service_id": "shop",
            "closed_prefix_suid": self.events[upto].suid,
            "unresolved_count": 0,
            "generated_at": datetime.now(UTC),
            "coverage": [PartitionOffset(partition=self.partition, offset=self.ends[upto])],
        }
        fields.update(changes)
        cert = Certificate(**fields)
        value = self.codec.encode(cert.schema_name, cert.to_avro())
        self.producer.produce(self.certificates_topic, key=key, value=value)
        self.producer.flush(10)

    def junk(self) -> None:
        self.producer.produce(self.certificates_topic, key=b"shop", value=b"\xc3\x01not avro")
        self.producer.flush(10)


def test_untrusted_certificates_never_advance_and_a_rebuild_replays(
    settings: DcbSettings, tmp_path: Path
) -> None:
    written = HandWritten(settings)
    certify, events = written.certify, written.events

    def students() -> list[str]:
        roster = committed_rows(settings, ROSTERS).get("shop/course:c1", {})
        return [str(s) for s in roster.get("students", [])]

    runner = Runner(settings, tmp_path).start()
    try:
        certify(4, allocator_lineage_id="lineage-2")  # another allocator's
        certify(4, key=b"other")  # read under another service's key
        certify(4, status="UNRECONCILED")
        certify(4, certificate_version=7)
        written.junk()
        certify(1)  # the first good one: two events
        deadline = time.monotonic() + 60
        while students() != ["s0", "s1"]:
            assert time.monotonic() < deadline, runner.log()[-3000:]
            time.sleep(0.3)
        certify(0)  # backwards
        certify(4, allocator_lineage_id="lineage-2")
        time.sleep(3)  # what the runner would have applied by now, had it trusted them
        assert students() == ["s0", "s1"]
        log = runner.log()
        for reason in ("foreign_lineage", "foreign_service", "not_ready", "malformed", "backwards"):
            assert reason in log, reason
        certify(4)
        deadline = time.monotonic() + 60
        while students() != [f"s{n}" for n in range(5)]:
            assert time.monotonic() < deadline, runner.log()[-3000:]
            time.sleep(0.3)
        # A rebuild fences the live runner, which replays from the beginning.
        result = dcb(
            "project", "rebuild", ROSTERS, "--app", APP, "--json", env=worker_env(settings)
        )
        assert result.exit_code == 0, result.stderr
        assert result.json == {"projection": ROSTERS, "rowsDeleted": 1}
        deadline = time.monotonic() + 60
        while "restoring from its checkpoint" not in runner.log():
            assert time.monotonic() < deadline, runner.log()[-3000:]
            time.sleep(0.3)
        while (checkpoint := last_checkpoint(settings, ROSTERS)).applied != 5:
            assert time.monotonic() < deadline, runner.log()[-3000:]
            time.sleep(0.3)
        assert students() == [f"s{n}" for n in range(5)]
        assert checkpoint.services["shop"].applied_through == events[4].suid
    finally:
        runner.stop()


def get(runner: Runner, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{runner.http_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_lag_from_the_runner_and_from_kafka_and_metrics(
    settings: DcbSettings, tmp_path: Path
) -> None:
    """Five events, a certificate over three: two behind, by both accounts."""
    written = HandWritten(settings)
    events = written.events
    written.certify(2)
    runner = Runner(settings, tmp_path).start()
    try:
        deadline = time.monotonic() + 60
        while last_checkpoint(settings, ROSTERS).applied != 3:
            assert time.monotonic() < deadline, runner.log()[-3000:]
            time.sleep(0.3)
        while (answer := get(runner, f"/projections/{ROSTERS}"))[0] != 200:
            assert time.monotonic() < deadline, answer
            time.sleep(0.3)
        lag = json.loads(answer[1])
        shop = {s["service_id"]: s for s in lag["services"]}["shop"]
        assert shop == {
            "service_id": "shop",
            "checkpoint_suid": events[2].suid,
            "head_suid": events[4].suid,
            "events_behind": 2,
        }
        assert lag["events_behind"] == 2 and lag["applied"] == 3
        status, text = get(runner, "/metrics")
        assert status == 200
        metrics = samples(text)
        assert metrics[f'dcb_projection_events_applied_total{{projection="{ROSTERS}"}}'] == 3
        assert metrics[f'dcb_projection_commit_seconds_count{{projection="{ROSTERS}"}}'] >= 1
        assert get(runner, "/projections/Not%20An%20Id!")[0] == 400
        assert get(runner, "/projections/unknown")[0] == 404
        cli = dcb("projections", "lag", "--projection", ROSTERS, "--json", env=worker_env(settings))
        assert cli.exit_code == 0, cli.stderr
        [from_kafka] = cli.json
        assert from_kafka["services"] == lag["services"]
        written.certify(4)
        while last_checkpoint(settings, ROSTERS).applied != 5:
            assert time.monotonic() < deadline, runner.log()[-3000:]
            time.sleep(0.3)
        cli = dcb("projections", "lag", "--json", env=worker_env(settings))
        assert {x["projection_id"]: x["events_behind"] for x in cli.json} == {
            ROSTERS: 0,
            "subscription-totals": 0,
        }
    finally:
        runner.stop()


def test_no_more_projections_poll_at_once_than_allowed(settings: DcbSettings) -> None:
    """Six projections, two slots. A fold waits (up to 2 s) for a second fold to run
    beside it, so two fold at once whenever the pool lets them: the peak is the limit."""
    written = HandWritten(settings)
    written.certify(4)
    changed = threading.Condition()
    active, peak = [0], [0]

    def slow(row: Row, _event: ProjectedEvent) -> Row:
        with changed:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            changed.notify_all()
            changed.wait_for(lambda: active[0] >= 2, timeout=2)
        time.sleep(0.01)
        with changed:
            active[0] -= 1
        return {"n": row.get("n", 0) + 1}

    ids = [f"slow-{i}" for i in range(6)]
    registry = ProjectorRegistry([ServiceProjector(id=i, query=(), fold=slow) for i in ids])
    config = settings.projections.model_copy(update={"max_concurrent": 2, "http_port": 0})
    limited = settings.model_copy(update={"projections": config})
    stop = threading.Event()
    running = threading.Thread(target=run_projections, args=(registry, limited, stop))
    running.start()
    try:
        deadline = time.monotonic() + 90
        while any(last_checkpoint(settings, i).applied < 5 for i in ids):
            assert running.is_alive() and time.monotonic() < deadline
            time.sleep(0.3)
    finally:
        stop.set()
        running.join(60)
    assert peak[0] == 2
    assert all(committed_rows(settings, i) == {"shop": {"n": 5}} for i in ids)


def test_project_refuses_a_registry_it_cannot_load(settings: DcbSettings) -> None:
    result = dcb("project", "--app", "no.such.module:registry", env=worker_env(settings))
    assert result.exit_code == 1
    assert "projection_registry_not_found" in result.stderr
    result = dcb("project", "rebuild", "nope", "--app", APP, "--json", env=worker_env(settings))
    assert result.exit_code == 1 and result.json["error"]["code"] == "unknown_projection"
