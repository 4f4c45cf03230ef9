"""The broker's refusals of a principal, as one typed error (``not_authorized``).

On a secure broker a tenant's principal may touch only its own prefix; whatever Kafka
error says "not yours" (topic, group, transactional id, cluster, or the login itself)
reaches callers as :class:`~streams.errors.NotAuthorizedError`, never as a retry.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from streams.errors import DcbError, KafkaUnavailableError, NotAuthorizedError
from streams.kafka import clients
from streams.kafka.connection import Brokers, connection

LOGIN_PROBE_S = 5.0

_REFUSALS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)


def refusal(error: KafkaError | KafkaException | None, what: str) -> NotAuthorizedError | None:
    """The typed error when ``error`` is the broker refusing the principal ``what``
    needed; None for any other error."""
    if isinstance(error, KafkaException):
        error = error.args[0] if error.args and isinstance(error.args[0], KafkaError) else None
    if error is None or error.code() not in _REFUSALS:
        return None
    return NotAuthorizedError(f"the broker refused {what}: {error.str()}", kafka_error=error.name())


def produce_confirmed(
    producer: Producer, topic: str, key: bytes, value: bytes, what: str, timeout_s: float
) -> None:
    """Produce one record and return once the broker has it. A refusal raises
    :class:`~streams.errors.NotAuthorizedError`; any other failure, or no answer within
    ``timeout_s``, :class:`~streams.errors.KafkaUnavailableError`."""
    answered = threading.Event()  # another thread may serve the report (a shared producer)
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _message: Message) -> None:
        if err is not None:
            failed.append(err)
        answered.set()

    deadline = time.monotonic() + timeout_s
    producer.produce(topic, key=key, value=value, on_delivery=delivered)
    producer.flush(timeout_s)
    if not answered.wait(max(deadline - time.monotonic(), 0.0)):
        raise KafkaUnavailableError(f"{what}: not sent within {timeout_s:g} s", topic=topic)
    if failed:
        raise refusal(failed[0], what) or KafkaUnavailableError(f"{what}: {failed[0]}")


def unreachable(brokers: Brokers, exc: KafkaException, what: str) -> DcbError:
    """Why a request got no answer at all: a login the broker failed (librdkafka says so
    only to an error callback, so a fresh client is asked) or a broker out of reach."""
    kafka = connection(brokers)
    if kafka.protocol.startswith("SASL"):
        heard: list[KafkaError] = []
        probe = clients.admin(kafka, error_cb=heard.append)
        try:
            probe.list_topics(timeout=LOGIN_PROBE_S)
        except KafkaException:
            deadline = time.monotonic() + LOGIN_PROBE_S
            why = f"{what} (logging in as {kafka.username})"
            while time.monotonic() < deadline:
                probe.poll(0.2)  # serves the error callback
                if refused := next(filter(None, (refusal(e, why) for e in heard)), None):
                    return refused
    return KafkaUnavailableError(f"{what}: {exc}", bootstrap_servers=kafka.bootstrap_servers)
