"""faust-streaming against the real broker: codec round trip and exactly-once outputs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.codec import AvroCodec
from streams.model.records import CommitResult
from tests.integration.kafka_helpers import create_topic, produce_all, read_all
from tests.integration.workers import ChildProcess
from tests.strategies import samples

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


class RelayWorker(ChildProcess):
    """The relay faust worker as a separate OS process (so it can be SIGKILLed)."""

    def __init__(self, bootstrap: str, prefix: str, workdir: Path) -> None:
        super().__init__()
        self.bootstrap, self.prefix, self.workdir = bootstrap, prefix, workdir

    @property
    def log(self) -> Path:
        return self.workdir / f"relay-{self.runs}.log"

    def start(self, crash_after: int = 0) -> None:
        self.runs += 1
        env = {
            **os.environ,
            "RELAY_BOOTSTRAP": self.bootstrap,
            "RELAY_PREFIX": self.prefix,
            "RELAY_DATADIR": str(self.workdir / "faust"),
            "RELAY_CRASH_AFTER": str(crash_after),
        }
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.integration.faust_relay",
                    "worker",
                    "-l",
                    "info",
                    "--without-web",
                ],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def relayed_lines(self) -> int:
        return self.log.read_text(errors="replace").count("relay: relayed offset")


@pytest.fixture
def relay(bootstrap_servers: str, topic_prefix: str, tmp_path: Path) -> Iterator[RelayWorker]:
    create_topic(bootstrap_servers, f"{topic_prefix}relay-in", partitions=2)
    create_topic(bootstrap_servers, f"{topic_prefix}relay-out", partitions=2)
    worker = RelayWorker(bootstrap_servers, topic_prefix, tmp_path)
    yield worker
    worker.stop()


def test_faust_agent_round_trips_every_topic_record(
    relay: RelayWorker, bootstrap_servers: str, topic_prefix: str, codec: AvroCodec
) -> None:
    records = samples()
    relay.start()
    produce_all(
        bootstrap_servers,
        f"{topic_prefix}relay-in",
        [(b"k-bad", b"not avro at all")]  # the agent logs it and keeps going
        + [
            (f"k{i}".encode(), codec.encode(rec.schema_name, rec.to_avro()))
            for i, rec in enumerate(records)
        ],
    )
    out = read_all(
        bootstrap_servers, f"{topic_prefix}relay-out", expect_at_least=len(records), timeout_s=90
    )
    by_key = {m.key().decode(): m.value() for m in out}
    assert len(out) == len(records), relay.log.read_text()[-3000:]
    assert "undecodable record" in relay.log.read_text()
    for i, rec in enumerate(records):
        decoded = codec.decode(by_key[f"k{i}"], expected=rec.schema_name)
        assert type(rec).from_avro(decoded.value) == rec


def test_aborted_faust_step_leaves_no_visible_output(
    relay: RelayWorker, bootstrap_servers: str, topic_prefix: str, codec: AvroCodec
) -> None:
    """A worker killed after sending outputs but before its transaction commits: those
    outputs stay invisible to read_committed readers; the restarted worker redoes the work
    and every input appears exactly once."""
    inputs = [
        CommitResult.from_avro({**samples()[7].to_avro(), "attemptId": f"attempt-{i:03d}"})
        for i in range(20)
    ]
    produce_all(
        bootstrap_servers,
        f"{topic_prefix}relay-in",
        [(rec.attempt_id.encode(), codec.encode(rec.schema_name, rec.to_avro())) for rec in inputs],
    )
    relay.start(crash_after=10)
    assert relay.wait_exit(120) == -9, relay.log.read_text()[-3000:]
    assert relay.relayed_lines() == 10

    relay.start()
    committed = read_all(
        bootstrap_servers, f"{topic_prefix}relay-out", expect_at_least=20, timeout_s=120, settle_s=4
    )
    everything = read_all(
        bootstrap_servers,
        f"{topic_prefix}relay-out",
        expect_at_least=20,
        read_committed=False,
        settle_s=1,
    )

    seen = Counter(
        CommitResult.from_avro(codec.decode(m.value()).value).attempt_id for m in committed
    )
    assert seen == Counter(rec.attempt_id for rec in inputs), "each input exactly once"
    # The killed run's outputs did reach the broker, in a transaction that was aborted:
    # a read_uncommitted reader sees them, a read_committed one never did.
    assert len(everything) > len(committed)
    assert len(everything) - len(committed) >= 1
