"""Where the brokers are and who this client is: what every Kafka client is built from.

A plain ``host:port`` string still works for an unsecured broker (the tests' raw readers
use one); with SASL, the client settings (``DCB_SECURITY__*``) ride along here, so the
broker, not the client's courtesy, decides what a tenant may read and write.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

Protocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


@dataclass(frozen=True)
class KafkaConnection:
    bootstrap_servers: str
    protocol: Protocol = "PLAINTEXT"
    mechanism: Mechanism = "SCRAM-SHA-512"
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def config(self) -> dict[str, Any]:
        """The librdkafka properties of this connection."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.protocol != "PLAINTEXT":
            conf["security.protocol"] = self.protocol
        if self.protocol.startswith("SASL"):
            conf.update(
                {
                    "sasl.mechanism": self.mechanism,
                    "sasl.username": self.username or "",
                    "sasl.password": self.password or "",
                }
            )
        return conf


Brokers = KafkaConnection | str


def connection(brokers: Brokers, like: KafkaConnection | None = None) -> KafkaConnection:
    """``brokers`` as a connection; a bare address takes ``like``'s credentials."""
    if isinstance(brokers, KafkaConnection):
        return brokers
    return replace(like, bootstrap_servers=brokers) if like else KafkaConnection(brokers)
