"""Crashes under the conditional workload users run, checked around the product.

Every test runs concurrent course subscriptions (two tags per event, conditions on both:
capacity and a per-student limit) through the SDK, injects a fault while rounds are in
flight — provably: an attempt sent before it is answered after it, commits go on after
it, and where the design leaves them, the killed round's records are on the broker but
never readable committed — and then compares what a raw ``read_committed`` consumer finds
on ``dcb.events`` with what the writers were told (``tests/integration/oracle.py``).
Each runs with both tag placements (``pipeline_settings``).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streams.infra.broker import EmbeddedBroker
from streams.infra.ports import restartable_port
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicRole, ledger_partition, topic_name, topic_specs
from streams.sdk import DcbClient
from streams.settings import BrokerSettings, DcbSettings, TopicSettings
from tests.integration.certificates import check_every_certificate
from tests.integration.faults import aborted, kill_in_flight
from tests.integration.kafka_helpers import records_on
from tests.integration.load import Append, Subscriptions
from tests.integration.oracle import check_subscriptions, committed_events, dead_letters
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration
GRACE_MS = 3_000


def views(settings: DcbSettings, services: int, prefix: str) -> list[DcbClient]:
    """Clients of ``services`` services sharing one producer and answer listener."""
    root = DcbClient(service_id=f"{prefix}-0", settings=settings, timeout_s=30)
    return [root] + [root.for_service(f"{prefix}-{i}") for i in range(1, services)]


def close(clients_: list[DcbClient]) -> None:
    for client in reversed(clients_):
        client.close()


def check(load: Subscriptions, settings: DcbSettings, services: set[str]) -> None:
    """The oracle, every certificate against the log, and no dead letter."""
    check_subscriptions(committed_events(settings), load)
    assert check_every_certificate(settings, services) >= len(services)
    assert dead_letters(settings) == []


def kill_mid_round(worker: WorkerProcess, settings: DcbSettings, tries: int = 10) -> float:
    """SIGKILL ``worker`` in the middle of a round and start it again, until a killed
    round is seen aborted (its records on the broker, never committed); when that was."""
    for _ in range(tries):
        moment, window = kill_in_flight(worker, settings)
        worker.start()
        if aborted(settings, window):
            return moment
    raise AssertionError(f"no kill of {tries} landed inside an open round")


def assigned(worker: WorkerProcess) -> str:
    lines = worker.log.read_text(errors="replace").splitlines()
    return next((line for line in reversed(lines) if "streams.worker: assigned " in line), "")


def owned_ledger_partitions(worker: WorkerProcess, settings: DcbSettings) -> set[int]:
    """The commands partitions ``worker`` last said it was assigned."""
    commands = re.escape(topic_name(settings.topics, TopicRole.COMMANDS))
    found = re.search(rf"{commands}\[([0-9, ]*)\]", assigned(worker))
    return {int(p) for p in found.group(1).split(", ")} if found else set()


def owns_all(worker: WorkerProcess, settings: DcbSettings) -> bool:
    return owned_ledger_partitions(worker, settings) == set(range(settings.topics.partitions))


def owned_by(worker: WorkerProcess, settings: DcbSettings) -> Callable[[Append], bool]:
    """Whether an append's service is one of those ``worker`` commits for."""
    owned = owned_ledger_partitions(worker, settings)
    assert owned, f"{worker.name} owns no commands partition"
    return lambda append: ledger_partition(append.service, settings.topics) in owned


def two_workers(settings: DcbSettings, tmp_path: Path) -> tuple[WorkerProcess, WorkerProcess]:
    """Workers a and b in one group, once each owns some of the partitions."""
    a = WorkerProcess(settings, tmp_path, "a", grace_ms=GRACE_MS).start()
    b = WorkerProcess(settings, tmp_path, "b", grace_ms=GRACE_MS).start()
    commands = topic_name(settings.topics, TopicRole.COMMANDS)
    wait_until(lambda: all(commands in assigned(w) for w in (a, b)), 60, "not shared")
    return a, b


def wait_until(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_kill_9_mid_round_loses_and_duplicates_nothing(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    settings = pipeline_settings
    clients_ = views(settings, 2, "kill")
    try:
        load = Subscriptions(clients_, writers=8)
        load.wait_for(10)
        moment = kill_mid_round(worker, settings)
        restarted = time.monotonic()
        load.wait_for(len(load.committed()) + 10)
        load.stop()
        load.join(240)
    finally:
        close(clients_)
    assert load.answered_across(moment), "nothing was in flight across the kill"
    assert load.committed_after(restarted), "nothing committed after the restart"
    check(load, settings, {c.service_id for c in clients_})


def test_kill_9_during_a_large_batch_hides_all_of_it_and_answers_all_of_it(
    pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    """200 attempts wait while no worker runs, so the first round takes them as one batch;
    the worker is killed inside that round: nothing of it becomes visible, and after the
    restart every attempt is answered, each event once, SUIDs increasing."""
    settings = pipeline_settings
    worker = WorkerProcess(settings, tmp_path, "batch", grace_ms=GRACE_MS)
    clients_ = views(settings, 1, "batch")
    commands = topic_name(settings.topics, TopicRole.COMMANDS)
    bootstrap = settings.resolved_bootstrap_servers
    try:
        loads: list[Subscriptions] = []
        for attempt in range(4):
            load = Subscriptions(  # its own courses: the seats of the last try are taken
                clients_, writers=200, per_writer=1, courses=40, students=200, names=f"t{attempt}"
            )
            loads.append(load)
            sent = 200 * (attempt + 1)
            wait_until(lambda: records_on(bootstrap, commands) >= sent, 60, "not all sent")  # noqa: B023
            worker.start(wait=False)
            _, window = kill_in_flight(worker, settings)
            worker.start()
            if aborted(settings, window):
                break
            load.join(120)
            worker.stop()
        else:
            raise AssertionError("no kill landed inside the large round")
        load.join(120)
    finally:
        close(clients_)
        worker.stop()
    outcomes = load.outcomes()
    assert outcomes.get("unanswered", 0) == 0, f"attempts left unanswered: {outcomes}"
    # 200 picks of 40 courses of 5 seats fill >= 146 seats in 20,000 simulated draws
    assert len(load.committed()) >= 140, f"the batch was not committed: {outcomes}"
    check_subscriptions(committed_events(settings), *loads)
    assert dead_letters(settings) == []


def test_two_workers_share_partitions_and_survive_losing_one(
    pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    settings = pipeline_settings
    a, b = two_workers(settings, tmp_path)
    clients_ = views(settings, 6, "shared")
    try:
        load = Subscriptions(clients_, writers=8)
        load.wait_for(12)
        load.wait_in_flight(owned_by(a, settings))
        a.kill()
        moment = time.monotonic()
        load.wait_for(len(load.committed()) + 10)
        load.stop()
        load.join(240)
        wait_until(lambda: owns_all(b, settings), 30, "b never took everything over")
    finally:
        close(clients_)
        a.stop()
        b.stop()
    assert load.answered_across(moment), "nothing was in flight across the kill"
    assert load.committed_after(moment + 1)
    check(load, settings, {c.service_id for c in clients_})


def test_a_worker_joining_under_load_takes_partitions_and_nothing_is_lost_or_doubled(
    pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    settings = pipeline_settings
    a = WorkerProcess(settings, tmp_path, "a", grace_ms=GRACE_MS).start()
    b = WorkerProcess(settings, tmp_path, "b", grace_ms=GRACE_MS)
    clients_ = views(settings, 6, "joined")
    commands = topic_name(settings.topics, TopicRole.COMMANDS)
    try:
        load = Subscriptions(clients_, writers=8)
        load.wait_for(12)
        load.wait_in_flight()  # the join starts with an append in flight
        moment = time.monotonic()
        b.start()
        load.wait_for(len(load.committed()) + 10)
        load.stop()
        load.join(240)
        assert commands in assigned(b)
    finally:
        close(clients_)
        a.stop()
        b.stop()
    assert load.answered_across(moment)
    check(load, settings, {c.service_id for c in clients_})


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of the test's own, so killing it disturbs no other test."""
    ports = {"port": restartable_port(), "controller_port": restartable_port()}
    broker = EmbeddedBroker(BrokerSettings(**ports, data_dir=tmp_path / "kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def own_settings(broker: EmbeddedBroker, placement: str) -> DcbSettings:
    bootstrap = broker.settings.bootstrap_servers
    topics = TopicSettings(prefix="r.", partitions=2, tag_partitions=3, tag_placement=placement)
    settings = DcbSettings(bootstrap_servers=bootstrap, topics=topics)
    ensure_topics(clients.admin(bootstrap), topic_specs(settings.topics))
    return settings


def crash_broker_and_finish(broker: EmbeddedBroker, load: Subscriptions) -> float:
    """SIGKILL the broker (a crash, not a shutdown) with an append in flight and start it
    again; once 10 more commits came, let the writers finish. When it was killed."""
    load.wait_in_flight()
    broker.kill()
    moment = time.monotonic()
    broker.start()
    load.wait_for(len(load.committed()) + 10, timeout_s=240)
    load.stop()
    load.join(300)
    return moment


@pytest.mark.parametrize("placement", ["service", "tag"])
def test_a_broker_sigkill_under_load_loses_and_duplicates_nothing(
    own_broker: EmbeddedBroker, placement: str, tmp_path: Path
) -> None:
    settings = own_settings(own_broker, placement)
    worker = WorkerProcess(settings, tmp_path, "worker", grace_ms=GRACE_MS).start()
    clients_ = views(settings, 2, "restart")
    try:
        load = Subscriptions(clients_, writers=8)
        load.wait_for(10)
        moment = crash_broker_and_finish(own_broker, load)
    finally:
        close(clients_)
        worker.stop()
    assert load.answered_across(moment), "nothing was in flight across the broker's crash"
    assert load.committed_after(moment + 1), "nothing committed after the broker came back"
    check(load, settings, {c.service_id for c in clients_})


@pytest.mark.parametrize("placement", ["service", "tag"])
def test_a_zombie_worker_writes_nothing_visible_then_a_broker_crash_restores_whole(
    own_broker: EmbeddedBroker, placement: str, tmp_path: Path
) -> None:
    """A worker frozen (SIGSTOP) until the group moves its partitions, then thawed: what it
    was doing can never commit. Then the broker is SIGKILLed: the tables restore whole (a
    header restored without its rows once sent every later delivery to dead letters)."""
    settings = own_settings(own_broker, placement)
    a, b = two_workers(settings, tmp_path)
    clients_ = views(settings, 4, "zombie")
    try:
        load = Subscriptions(clients_, writers=8)
        load.wait_for(10)
        zombie = a.child_pid()
        assert zombie is not None
        load.wait_in_flight(owned_by(a, settings))
        os.kill(zombie, signal.SIGSTOP)
        frozen = time.monotonic()
        wait_until(lambda: owns_all(b, settings), 60, "b never took the zombie's partitions")
        seen = len(a.log.read_text(errors="replace"))
        os.kill(zombie, signal.SIGCONT)
        wait_until(
            lambda: any(
                marker in a.log.read_text(errors="replace")[seen:]
                for marker in ("aborting the round", "exiting so that", "partitions lost")
            ),
            60,
            "the thawed zombie never found out it had lost its partitions",
        )
        load.wait_for(len(load.committed()) + 5)
        crashed = crash_broker_and_finish(own_broker, load)
    finally:
        close(clients_)
        a.stop()
        b.stop()
    assert load.answered_across(frozen), "nothing was in flight when the worker froze"
    assert load.committed_after(crashed + 1), "nothing committed after the broker came back"
    check(load, settings, {c.service_id for c in clients_})
