"""The broker's refusals of a principal, as one typed error (``not_authorized``).

On a secure broker a tenant's principal may touch only its own prefix; whatever Kafka
error says "not yours" (topic, group, transactional id, cluster, or the login itself)
reaches callers as :class:`~streams.errors.NotAuthorizedError`, never as a retry.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from streams.errors import NotAuthorizedError

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
