"""Prometheus metrics of a worker (``/metrics`` at ``DCB_WORKER__METRICS_PORT``).

Fed once per committed round from what the round sent (records by topic, the
certificates among them), never from the processors' state: reading the metrics takes
nothing from the round loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from streams.codec import AvroCodec
from streams.kafka.checkpoint import Output
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import Certificate
from streams.model.suid import suid_ticks, ticks
from streams.settings import DcbSettings

_TICKS_PER_S = 10_000_000
log = logging.getLogger(__name__)


class WorkerMetrics:
    def __init__(self, settings: DcbSettings, codec: AvroCodec) -> None:
        self.codec = codec
        self.roles = {topic_name(settings.topics, role): role for role in TopicRole}
        self.registry = r = CollectorRegistry()
        self.rounds = Counter("dcb_worker_rounds", "Rounds committed.", registry=r)
        self.records_in = Counter("dcb_worker_records_in", "Records taken.", registry=r)
        self.records_out = Counter(
            "dcb_worker_records_out", "Records sent, by topic role.", ["role"], registry=r
        )
        self.commits = Counter(
            "dcb_worker_events_committed", "Events published on dcb.events.", registry=r
        )
        self.answers = Counter(
            "dcb_worker_attempts_answered", "Attempts answered (committed or not).", registry=r
        )
        self.dead_letters = Counter(
            "dcb_worker_dead_letters", "Records and items sent to dead letters.", registry=r
        )
        self.batch = Histogram(
            "dcb_worker_round_records",
            "Input records per round (the group commit's batch size).",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 500),
        )
        self.latency = Histogram(
            "dcb_worker_round_seconds",
            "A round from its records taken to its transaction committed.",
            registry=r,
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
        )
        self.prefix_age = Gauge(
            "dcb_worker_certificate_prefix_age_seconds",
            "Per service, how old the closed prefix was when its last certificate was made.",
            ["service"],
            registry=r,
        )
        self.unresolved = Gauge(
            "dcb_worker_unresolved",
            "Per service, candidates not yet settled in the last certificate.",
            ["service"],
            registry=r,
        )

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, host, registry=self.registry)

    def round(
        self, taken: int, outputs: Sequence[Output], started: float, committed: float
    ) -> None:
        """Count a committed round (``started`` and ``committed``: monotonic seconds; it is
        counted when settled, which may be later). Metrics never stop a worker: a failure
        here is logged."""
        try:
            self._round(taken, outputs, committed - started)
        except Exception:
            log.exception("worker metrics could not count a round")

    def _round(self, taken: int, outputs: Sequence[Output], seconds: float) -> None:
        self.rounds.inc()
        self.records_in.inc(taken)
        self.batch.observe(taken)
        self.latency.observe(seconds)
        counts: dict[str, int] = {}
        for output in outputs:
            counts[output.topic] = counts.get(output.topic, 0) + 1
            if self.roles.get(output.topic) is TopicRole.CERTIFICATES and output.value:
                self._certificate(output.value)
        self._count(counts)

    def _count(self, counts: Mapping[str, int]) -> None:
        for topic, n in counts.items():
            role = self.roles.get(topic)
            self.records_out.labels(role.value if role else "changelog").inc(n)
            if role is TopicRole.EVENTS:
                self.commits.inc(n)
            elif role is TopicRole.COMMIT_RESULTS:
                self.answers.inc(n)
            elif role is TopicRole.DEAD_LETTERS:
                self.dead_letters.inc(n)

    def _certificate(self, value: bytes) -> None:
        c = Certificate.from_bytes(self.codec, value)
        self.unresolved.labels(c.service_id).set(c.unresolved_count)
        if c.closed_prefix_suid is not None:
            waited = ticks(c.generated_at) - suid_ticks(c.closed_prefix_suid)
            self.prefix_age.labels(c.service_id).set(max(waited, 0) / _TICKS_PER_S)
