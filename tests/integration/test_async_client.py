"""``AsyncDcbClient`` on the real broker: the same calls as ``DcbClient``, waiting in the
event loop, so hundreds of coroutines have their appends in flight at once."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from streams.errors import AnswerTimeoutError, AppendConditionFailed
from streams.infra.worker_process import worker_env
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import AppendCondition, QueryItem
from streams.sdk import AppendResult, AsyncDcbClient
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import records_on
from tests.integration.load import registered
from tests.integration.oracle import committed_events, dead_letters
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration

CLAIMS, NAMES = 200, 40  # coroutines, and the user names they claim (5 for each)


def name_is_free(name: str, after: str | None = None) -> AppendCondition:
    query = [QueryItem(types=["UserRegistered"], tags=[f"username:{name}"])]
    return AppendCondition(fail_if_events_match=query, after=after)


def test_append_read_certificate_and_a_failed_condition(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    async def main() -> None:
        async with AsyncDcbClient(service_id="shop", settings=pipeline_settings) as client:
            first = await client.append([registered("bob", "org:acme")], name_is_free("bob"))
            read = await client.read([QueryItem(tags=["username:bob"])])  # read-your-writes
            assert [e.position for e in read] == first.suids and read.head == first.suids[0]
            with pytest.raises(AppendConditionFailed) as info:
                await client.append([registered("bob")], name_is_free("bob"))
            assert info.value.details["conflictingSuid"] == first.suids[0]
            second = await client.append([registered("bob")], name_is_free("bob", read.head))
            assert second.suids[0] > first.suids[0]
            other = client.for_service("shop-2")  # shares the producer and the listener
            assert [e.position for e in await other.read()] == []
            await other.close()
            deadline = time.monotonic() + 30
            while (certificate := await client.certificate()) is None or (
                certificate.closed_prefix_suid or ""
            ) < second.suids[0]:
                assert time.monotonic() < deadline, f"never certified: {certificate}"
                await asyncio.sleep(0.2)

    asyncio.run(main())


def test_hundreds_of_coroutines_have_their_appends_in_flight_at_once_and_conflict_exactly(
    pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    """200 coroutines claim 40 names (5 for each), under the condition that the name is
    free, with no worker running: every command reaches the broker before any answer (in
    one thread; a client running each call in a thread of a pool had a handful in flight),
    then a worker starts and takes them; each name is committed exactly once, as a raw
    read of the log shows, and every other claim is told of the conflict."""
    settings = pipeline_settings
    commands = topic_name(settings.topics, TopicRole.COMMANDS)
    bootstrap = settings.resolved_bootstrap_servers
    worker = WorkerProcess(settings, tmp_path, "late", grace_ms=3_000)

    async def claim(client: AsyncDcbClient, n: int) -> AppendResult | str:
        name = f"n{n % NAMES}"
        try:
            return await client.append([registered(name)], name_is_free(name))
        except AppendConditionFailed:
            return name

    async def main() -> list[AppendResult | str]:
        async with AsyncDcbClient(service_id="crowd", settings=settings, timeout_s=120) as c:
            claims = [asyncio.create_task(claim(c, n)) for n in range(CLAIMS)]
            deadline = time.monotonic() + 60
            while records_on(bootstrap, commands) < CLAIMS:
                assert time.monotonic() < deadline, "the claims never were all in flight"
                assert not any(t.done() for t in claims), [t for t in claims if t.done()]
                await asyncio.sleep(0.2)
            await asyncio.to_thread(worker.start)
            return await asyncio.gather(*claims)

    try:
        outcomes = asyncio.run(main())
    finally:
        worker.stop()
    committed = [o for o in outcomes if isinstance(o, AppendResult)]
    refused = Counter(o for o in outcomes if isinstance(o, str))
    assert len(committed) == NAMES and sum(refused.values()) == CLAIMS - NAMES
    logged = Counter(e.body["name"] for e in committed_events(settings) if e.service == "crowd")
    assert logged == Counter({f"n{i}": 1 for i in range(NAMES)})
    assert dead_letters(settings) == []


def test_an_append_nobody_answers_raises_answer_timeout(pipeline_settings: DcbSettings) -> None:
    async def main() -> None:
        async with AsyncDcbClient(
            service_id="alone", settings=pipeline_settings, timeout_s=1
        ) as client:
            started = time.monotonic()
            with pytest.raises(AnswerTimeoutError):
                await client.append([registered("nobody")])  # no worker runs
            assert time.monotonic() - started >= 2  # sent once more after the first silence

    asyncio.run(main())


def readme_programs() -> list[str]:
    """The README's Python programs that run as they are (not its module sketches)."""
    text = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return [b for b in blocks if "Client(service_id=" in b]


@pytest.mark.parametrize("program", readme_programs(), ids=["blocking", "asyncio"])
def test_the_readme_client_programs_run_as_written(
    program: str, worker: WorkerProcess, pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    """Pointed at this test's broker and topics by the environment, as a user would."""
    env = {**os.environ, **worker_env(pipeline_settings)}
    env["DCB_BOOTSTRAP_SERVERS"] = pipeline_settings.resolved_bootstrap_servers
    (tmp_path / "program.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "program.py"], cwd=tmp_path, env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    printed = done.stdout.decode()
    if "AsyncDcbClient" in program:
        assert printed.strip() == "100"
    else:
        assert "username:bob" in printed
