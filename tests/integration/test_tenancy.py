"""Tenants on a secure broker: every cross-tenant read, write, group join, transaction and
admin call is refused by the broker itself; same-tenant work goes on unaffected.

The broker is started with ``dcb broker start --secure`` (SASL/SCRAM, StandardAuthorizer)
and the tenants with ``dcb tenants create``, as a user would; the refusals are checked
with raw confluent-kafka clients logged in as the tenant (around the product), and once
through the SDK (a typed ``not_authorized``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from streams import AppendCondition, AppendConditionFailed, DcbClient, Event, Query
from streams.errors import NotAuthorizedError
from streams.infra.ports import free_port
from streams.kafka import clients
from streams.kafka.connection import KafkaConnection
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.settings import DcbSettings, SecuritySettings, TopicSettings
from tests.integration.cli import dcb
from tests.integration.load import Subscriptions
from tests.integration.test_projections import Runner, check_sample, wait_caught_up
from tests.integration.workers import WorkerProcess

TOPICS = TopicSettings(partitions=2, tag_partitions=2)


class SecureBroker:
    """``dcb broker start --secure`` on free ports in a data folder of its own."""

    def __init__(self, data_dir: Path) -> None:
        port, controller = free_port(), free_port()
        self.env = {
            "DCB_BROKER__PORT": str(port),
            "DCB_BROKER__CONTROLLER_PORT": str(controller),
            "DCB_BROKER__DATA_DIR": str(data_dir),
            "DCB_TOPICS__PARTITIONS": str(TOPICS.partitions),
            "DCB_TOPICS__TAG_PARTITIONS": str(TOPICS.tag_partitions),
        }
        self.bootstrap = f"127.0.0.1:{port}"

    def start(self) -> dict[str, str]:
        """Start it; the admin's client settings it printed."""
        started = dcb("broker", "start", "--secure", "--json", env=self.env)
        assert started.exit_code == 0, started.stderr
        assert started.json["secure"] is True
        return dict(started.json["admin"])

    def stop(self) -> None:
        dcb("broker", "stop", env=self.env)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = SecureBroker(tmp_path_factory.mktemp("secure-broker"))
    admin = broker.start()
    assert admin["DCB_SECURITY__USERNAME"] == "admin"
    assert admin["DCB_BOOTSTRAP_SERVERS"] == broker.bootstrap
    yield broker
    broker.stop()


def connection_of(env: dict[str, str]) -> KafkaConnection:
    return KafkaConnection(
        env["DCB_BOOTSTRAP_SERVERS"],
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        env["DCB_SECURITY__USERNAME"],
        env["DCB_SECURITY__PASSWORD"],
    )


def settings_of(env: dict[str, str], prefix: str | None = None) -> DcbSettings:
    """A tenant's settings as ``dcb tenants create`` printed them (``prefix``: a client
    that points its own login at another prefix)."""
    return DcbSettings(
        bootstrap_servers=env["DCB_BOOTSTRAP_SERVERS"],
        security=SecuritySettings(
            protocol="SASL_PLAINTEXT",
            username=env["DCB_SECURITY__USERNAME"],
            password=env["DCB_SECURITY__PASSWORD"],
        ),
        topics=TOPICS.model_copy(update={"prefix": prefix or env["DCB_TOPICS__PREFIX"]}),
    )


@pytest.fixture(scope="module")
def tenants(secure_broker: SecureBroker) -> dict[str, dict[str, str]]:
    """Tenants ``acme`` and ``beta``: their client settings, as the CLI printed them."""
    made = {}
    for name in (f"acme{uuid.uuid4().hex[:6]}", f"beta{uuid.uuid4().hex[:6]}"):
        created = dcb("tenants", "create", name, "--json", env=secure_broker.env)
        assert created.exit_code == 0, created.stderr
        made[name[:4]] = created.json["settings"]
    return made


@pytest.fixture(scope="module")
def acme_worker(
    tenants: dict[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(
        settings_of(tenants["acme"]), tmp_path_factory.mktemp("acme"), "acme", grace_ms=3_000
    )
    yield worker.start()
    worker.stop()


def refused(error: KafkaError | None, code: int) -> None:
    assert error is not None and error.code() == code, error


def first_message(consumer: Consumer, timeout_s: float = 30) -> Message:
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if (message := consumer.poll(0.5)) is not None:
                return message
        raise AssertionError("the broker said nothing")
    finally:
        consumer.close()


def test_a_tenant_works_on_its_own_topics_with_conditional_appends(
    tenants: dict[str, dict[str, str]], acme_worker: WorkerProcess
) -> None:
    with DcbClient(service_id="shop", settings=settings_of(tenants["acme"])) as client:
        bob = Query.of(types=["UserRegistered"], tags=["username:bob"])
        taken = client.read(bob)
        assert not taken
        condition = AppendCondition(fail_if_events_match=bob, after=taken.head)
        client.append([Event("UserRegistered", {"name": "bob"}, ["username:bob"])], condition)
        assert [e.event.event_type for e in client.read(bob)] == ["UserRegistered"]
        with pytest.raises(AppendConditionFailed):
            client.append([Event("UserRegistered", {"name": "bob"}, ["username:bob"])], condition)
    # The other tenant reads its own (empty) store unhindered.
    with DcbClient(service_id="shop", settings=settings_of(tenants["beta"])) as client:
        assert list(client.read()) == []


def test_a_tenants_projection_runner_folds_its_log_under_its_prefix(
    tenants: dict[str, dict[str, str]], acme_worker: WorkerProcess, tmp_path: Path
) -> None:
    """The runner's group and transactional id lie under the tenant's prefix too: under
    conditional load, its committed rows equal an independent fold of the tenant's log."""
    settings = settings_of(tenants["acme"])
    runner = Runner(settings, tmp_path).start()
    try:
        with DcbClient(service_id=f"u{uuid.uuid4().hex[:6]}", settings=settings) as client:
            load = Subscriptions([client], writers=2, per_writer=15)
            load.join(120)
            assert not load.errors, load.errors
            assert any(a.outcome == "committed" for a in load.appends)
        wait_caught_up(settings, runner)
        check_sample(settings)
    finally:
        runner.stop()


def test_the_sdk_on_another_tenants_prefix_raises_not_authorized(
    tenants: dict[str, dict[str, str]],
) -> None:
    beta_prefix = tenants["beta"]["DCB_TOPICS__PREFIX"]
    with pytest.raises(NotAuthorizedError) as caught:
        DcbClient(service_id="shop", settings=settings_of(tenants["acme"], prefix=beta_prefix))
    assert caught.value.code == "not_authorized"
    assert caught.value.details["kafka_error"] == "TOPIC_AUTHORIZATION_FAILED"


def test_every_cross_tenant_request_is_refused_by_the_broker(
    tenants: dict[str, dict[str, str]], acme_worker: WorkerProcess
) -> None:
    acme = connection_of(tenants["acme"])
    beta = settings_of(tenants["beta"]).topics
    commands, events = topic_name(beta, TopicRole.COMMANDS), topic_name(beta, TopicRole.EVENTS)

    # Write another tenant's topic.
    producer = clients.producer(acme, **{"message.timeout.ms": 10_000})
    reports: list[KafkaError | None] = []
    producer.produce(commands, b"x", on_delivery=lambda err, _m: reports.append(err))
    producer.flush(15)
    assert len(reports) == 1
    refused(reports[0], KafkaError.TOPIC_AUTHORIZATION_FAILED)

    # Read it: beta's own record is there for beta, not for acme (not even its metadata).
    written = clients.producer(connection_of(tenants["beta"]))
    written.produce(events, b"beta's", partition=0)
    assert written.flush(15) == 0
    mine = clients.consumer(connection_of(tenants["beta"]), f"{beta.prefix}oracle")
    mine.assign([TopicPartition(events, 0, 0)])
    assert first_message(mine).value() == b"beta's"
    reader = clients.consumer(acme, f"{tenants['acme']['DCB_TOPICS__PREFIX']}oracle")
    refused(
        reader.list_topics(events, timeout=10).topics[events].error,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    )
    reader.assign([TopicPartition(events, 0, 0)])
    with pytest.raises(AssertionError, match="said nothing"):
        first_message(reader, timeout_s=5)

    # Join its worker's group (on the tenant's own topic).
    own_events = topic_name(settings_of(tenants["acme"]).topics, TopicRole.EVENTS)
    joiner = clients.consumer(acme, tenants["beta"]["DCB_WORKER__APP_ID"])
    joiner.subscribe([own_events])
    refused(first_message(joiner).error(), KafkaError.GROUP_AUTHORIZATION_FAILED)

    # Take its worker's transactional id (to fence it).
    with pytest.raises(KafkaException) as fenced:
        clients.transactional_producer(acme, f"{tenants['beta']['DCB_WORKER__APP_ID']}-0")
    refused(fenced.value.args[0], KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    # Administer it: create, delete records, grant oneself more.
    admin = clients.admin(acme)
    with pytest.raises(KafkaException) as created:
        admin.create_topics([NewTopic(f"{beta.prefix}mine", 1, 1)])[f"{beta.prefix}mine"].result()
    refused(created.value.args[0], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    cut = admin.delete_records([TopicPartition(events, 0, 1)])
    with pytest.raises(KafkaException) as deleted:
        next(iter(cut.values())).result()
    # librdkafka asks for the leader first, and the broker does not even name it to acme.
    assert deleted.value.args[0].code() in {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError._NOENT,
    }
    low, _ = clients.consumer(
        connection_of(tenants["beta"]), f"{beta.prefix}oracle"
    ).get_watermark_offsets(TopicPartition(events, 0), timeout=10)
    assert low == 0, "acme's delete_records dropped beta's record"
    grant = AclBinding(
        ResourceType.TOPIC,
        beta.prefix,
        ResourcePatternType.PREFIXED,
        f"User:{tenants['acme']['DCB_SECURITY__USERNAME']}",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as granted:
        next(iter(admin.create_acls([grant]).values())).result()
    refused(granted.value.args[0], KafkaError.CLUSTER_AUTHORIZATION_FAILED)

    # Not even see it: the tenant's metadata lists its own topics alone.
    visible = set(admin.list_topics(timeout=10).topics)
    assert visible and all(t.startswith(tenants["acme"]["DCB_TOPICS__PREFIX"]) for t in visible)

    # The refusals changed nothing for the tenant itself (its worker still answers).
    with DcbClient(service_id="after", settings=settings_of(tenants["acme"])) as client:
        client.append([Event("Noted", {}, ["note:1"])])
        assert len(client.read()) == 1


def test_no_login_or_a_wrong_password_is_refused(
    secure_broker: SecureBroker, tenants: dict[str, dict[str, str]]
) -> None:
    wrong_env = {"DCB_SECURITY__PASSWORD": "not-the-password"}
    wrong = connection_of({**tenants["acme"], **wrong_env})
    anonymous = KafkaConnection(secure_broker.bootstrap)  # PLAINTEXT at a SASL listener
    # The broker fails the login, or drops a client that does not even try one.
    dropped = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
    for who, codes in ((wrong, {KafkaError._AUTHENTICATION}), (anonymous, dropped)):
        errors: list[KafkaError] = []
        admin = clients.admin(who, error_cb=errors.append)
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)
        deadline = time.monotonic() + 10
        while not codes & {e.code() for e in errors} and time.monotonic() < deadline:
            admin.poll(0.5)  # serves the error callback
        assert codes & {e.code() for e in errors}, errors
    # The SDK and the CLI say so, as a typed error.
    with pytest.raises(NotAuthorizedError) as caught:
        DcbClient(service_id="shop", settings=settings_of({**tenants["acme"], **wrong_env}))
    assert caught.value.details["kafka_error"] in {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"}
    read = dcb("read", "--service", "shop", "--json", env={**tenants["acme"], **wrong_env})
    assert read.exit_code == 1
    assert json.loads(read.stdout)["error"]["code"] == "not_authorized"


def test_a_worker_on_another_tenants_prefix_exits_not_authorized(
    tenants: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    beta_prefix = tenants["beta"]["DCB_TOPICS__PREFIX"]
    intruder = WorkerProcess(
        settings_of(tenants["acme"], prefix=beta_prefix), tmp_path, "intruder", grace_ms=3_000
    )
    intruder.start(wait=False)
    try:
        assert intruder.wait_exit(90) == 2  # final: the supervisor does not start it again
    finally:
        intruder.stop()
    assert "not_authorized" in intruder.log.read_text()
