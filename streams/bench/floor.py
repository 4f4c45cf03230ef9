"""The transport floor: what a step costs with none of the commit path's logic in it.

A faust agent on this project's exactly-once transport (``make_app``: one transaction per
process, checked sends, whole-step commits) relays a backlog of records, one step per
record and one output per step. The commit path runs several such steps per event
(:func:`steps_per_event`), each with more outputs and table writes, so the floor's
steps/s divided by them is a ceiling on events/s that no change inside the steps can lift
— only fewer steps or records per event can. ``dcb bench commit`` reports it beside the
raw baseline.

Run as a child process (``python -m streams.bench.floor worker``), configured by the
environment; it writes its result as JSON once it has done its steps.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from streams.errors import KafkaUnavailableError, WorkerStartError
from streams.infra.processes import terminate
from streams.infra.worker_process import worker_env
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicLayout
from streams.settings import DcbSettings

KEYS = 100  # record keys spread over the partitions
ENV_PREFIX = "DCB_FLOOR_"


class FloorResult(BaseModel):
    steps: int
    outputs_per_step: int
    steps_per_s: float
    cpu_us_per_step: float  # the worker process's CPU, all its threads

    def events_per_s_ceiling(self, tags: int) -> float:
        return self.steps_per_s / steps_per_event(tags)


def steps_per_event(tags: int) -> int:
    """Agent steps (records consumed by the worker) per committed event of ``tags`` tags
    and no append condition (a condition's other tags are targets too).

    One tag takes the one-phase path: the command, the tag's check-and-install, the
    evidence. More take two phases: the command, a PREPARE and a vote per tag, an INSTALL
    and its evidence per tag.
    """
    return 3 if tags == 1 else 1 + 4 * tags


def run_floor(
    settings: DcbSettings,
    steps: int,
    value: bytes,
    log: Path,
    outputs: int = 1,
    timeout_s: float = 300,
) -> FloorResult:
    """Relay ``steps`` records of ``value`` through a floor worker, ``outputs`` copies of
    each; its measured rate."""
    bootstrap = settings.resolved_bootstrap_servers
    source, out = floor_topics(settings)
    ensure_topics(
        clients.admin(bootstrap),
        [TopicLayout(t, settings.topics.partitions, 1, "delete") for t in (source, out)],
    )
    producer = clients.producer(bootstrap)
    for i in range(steps):
        producer.produce(source, key=str(i % KEYS).encode(), value=value)
        producer.poll(0)
    if producer.flush(60):
        raise KafkaUnavailableError("the floor's backlog was not delivered within 60 s")
    with tempfile.TemporaryDirectory(prefix="dcb-floor-") as scratch:
        result = Path(scratch) / "result.json"
        env = {
            **os.environ,
            **worker_env(settings),
            f"{ENV_PREFIX}STEPS": str(steps),
            f"{ENV_PREFIX}OUTPUTS": str(outputs),
            f"{ENV_PREFIX}DATADIR": str(Path(scratch) / "data"),
            f"{ENV_PREFIX}RESULT": str(result),
        }
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as output:
            command = [sys.executable, "-m", "streams.bench.floor", "worker", "-l", "info"]
            proc = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while not result.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise WorkerStartError(f"the floor worker gave no result; its log: {log}")
                time.sleep(0.2)
            return FloorResult.model_validate_json(result.read_text())
        finally:
            terminate(proc, 10)


def floor_topics(settings: DcbSettings) -> tuple[str, str]:
    """The floor's source and output topics, under the run's prefix."""
    prefix = settings.topics.prefix
    return f"{prefix}bench-floor-in", f"{prefix}bench-floor-out"


def floor_app() -> Any:
    """The floor worker's faust app: the worker's broker, app id and commit settings
    (``DCB_*``, as ``worker_env`` passes them) and its count and folders
    (``DCB_FLOOR_*``)."""
    from streams.kafka.faust_app import commit_options, make_app, send_in_transaction
    from streams.kafka.faust_transport import commit_path_producer

    env = {k.removeprefix(ENV_PREFIX): v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    settings = DcbSettings()
    steps, (source_topic, out) = int(env["STEPS"]), floor_topics(settings)
    outputs = int(env.get("OUTPUTS", "1"))
    app = make_app(
        f"{settings.worker.app_id}-floor",
        settings.resolved_bootstrap_servers,
        Path(env["DATADIR"]),
        **commit_options(settings.worker),
    )
    source = app.topic(
        source_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )

    @app.agent(source, name="floor")
    async def relay(stream: Any) -> None:
        gate = commit_path_producer(app).gate
        done, started, cpu_at_start = 0, 0.0, 0.0
        async for event in stream.events():
            async with gate.step():
                if not done:
                    started, cpu_at_start = time.monotonic(), _cpu_s()
                for _ in range(outputs):
                    await send_in_transaction(app, event, out, event.key, event.value)
                done += 1
            if done == steps:
                await app.consumer.commit()  # the last steps' outputs too
                wall, cpu = time.monotonic() - started, _cpu_s() - cpu_at_start
                result = FloorResult(
                    steps=steps,
                    outputs_per_step=outputs,
                    steps_per_s=round(steps / wall, 1),
                    cpu_us_per_step=round(1e6 * cpu / steps, 1),
                )
                written = Path(env["RESULT"] + ".tmp")  # renamed: never read half-written
                written.write_text(json.dumps(result.model_dump()))
                written.rename(env["RESULT"])

    return app


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    floor_app().main()
