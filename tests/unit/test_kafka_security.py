"""Logins and refusals, without a broker: what a connection tells librdkafka, which
Kafka errors are the broker refusing a principal, and how a secure broker is configured."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.errors import BrokerStartError, NotAuthorizedError
from streams.infra.broker import EmbeddedBroker
from streams.kafka.connection import KafkaConnection, connection
from streams.kafka.refusals import refusal
from streams.settings import BrokerSettings, DcbSettings, SecuritySettings


def test_a_plain_connection_sends_no_login_and_a_sasl_one_hides_its_password() -> None:
    assert KafkaConnection("h:1").config() == {"bootstrap.servers": "h:1"}
    sasl = KafkaConnection("h:1", "SASL_PLAINTEXT", "SCRAM-SHA-512", "acme", "s3cret")
    assert sasl.config() == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "acme",
        "sasl.password": "s3cret",
    }
    assert "s3cret" not in repr(sasl)


def test_settings_give_every_client_their_login_and_an_address_alone_borrows_it() -> None:
    settings = DcbSettings(
        bootstrap_servers="h:1",
        security=SecuritySettings(protocol="SASL_SSL", username="acme", password="pw"),
    )
    assert settings.kafka.config()["sasl.password"] == "pw"
    assert "pw" not in repr(settings)
    moved = connection("other:2", like=settings.kafka)
    assert (moved.bootstrap_servers, moved.username, moved.password) == ("other:2", "acme", "pw")
    assert connection("other:2") == KafkaConnection("other:2")


REFUSALS = ["TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER"]


@pytest.mark.parametrize(
    "name",
    [f"{what}_AUTHORIZATION_FAILED" for what in REFUSALS]
    + ["SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION"],
)
def test_the_broker_refusing_a_principal_is_not_authorized(name: str) -> None:
    code = getattr(KafkaError, name)
    for error in (KafkaError(code), KafkaException(KafkaError(code))):
        refused = refusal(error, "reading acme.events")
        assert isinstance(refused, NotAuthorizedError) and refused.code == "not_authorized"
        assert refused.details["kafka_error"] == KafkaError(code).name()
        assert "reading acme.events" in refused.message


@pytest.mark.parametrize(
    "code",
    [KafkaError._TRANSPORT, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._TIMED_OUT],
)
def test_other_errors_are_not_refusals(code: int) -> None:
    assert refusal(KafkaError(code), "x") is None
    assert refusal(KafkaException(KafkaError(code)), "x") is None
    assert refusal(None, "x") is None


def _broker(tmp_path: Path) -> EmbeddedBroker:
    return EmbeddedBroker(BrokerSettings(port=19500, controller_port=19501, data_dir=tmp_path))


def test_a_secure_broker_allows_only_what_acls_grant_and_has_one_super_user(
    tmp_path: Path,
) -> None:
    broker = _broker(tmp_path)
    assert "authorizer" not in broker._properties() and not broker.secure
    broker._make_secure()
    props = broker._properties()
    assert broker.secure
    assert "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" in props
    assert "allow.everyone.if.no.acl.found=false" in props
    assert "super.users=User:admin\n" in props
    assert "PLAINTEXT://" not in props.replace("SASL_PLAINTEXT://", "")
    assert (tmp_path / "admin.password").stat().st_mode & 0o777 == 0o600
    admin = broker.admin_connection()
    assert (admin.protocol, admin.username) == ("SASL_PLAINTEXT", "admin")


def test_security_is_chosen_when_a_folder_is_formatted_and_kept(tmp_path: Path) -> None:
    plain = _broker(tmp_path / "plain")
    (tmp_path / "plain" / "storage").mkdir(parents=True)
    (tmp_path / "plain" / "storage" / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(BrokerStartError, match="formatted without --secure"):
        plain._make_secure()
    secure = _broker(tmp_path / "secure")
    secure._make_secure()
    (tmp_path / "secure" / "admin.password").unlink()
    assert secure.secure  # a lost password does not turn the ACLs off
    with pytest.raises(BrokerStartError, match=r"admin\.password is gone"):
        secure.admin_connection()
