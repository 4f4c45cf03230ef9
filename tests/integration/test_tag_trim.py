"""Tag tables drop what ``dcb archive`` archived, on the real broker with a worker, in both
tag placements: the rows go from the changelog, a condition positioned below the trim is
refused by the table (``condition_below_archive``, seen through a raw command), and the
SDK answers that refusal by reading over archive and log: it fails the append when an
archived event matches, and commits it otherwise. A restarted worker restores the trim.

The oracle reads around the product: the tags changelog and ``dcb.events`` raw,
read_committed to the high watermark."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from streams.errors import AppendConditionFailed
from streams.kafka.topic_catalog import TopicRole, table_key, topic_name
from streams.model.records import AppendCondition, Command, CommitAttempt, EventData, QueryItem
from streams.sdk import DcbClient, Event
from streams.sdk.client import CommitChannel
from streams.settings import DcbSettings
from tests.integration.conftest import running_worker, with_lifecycle
from tests.integration.oracle import read_to_end
from tests.integration.test_archive_log import certified, run_archive, subscribe
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def trim_settings(pipeline_settings: DcbSettings, tmp_path: Path) -> DcbSettings:
    """The log-lifecycle settings with each tag placement."""
    return with_lifecycle(pipeline_settings, tmp_path)


@pytest.fixture
def trim_worker(trim_settings: DcbSettings, tmp_path: Path) -> Iterator[WorkerProcess]:
    yield from running_worker(trim_settings, tmp_path)


def stored_rows(settings: DcbSettings, worker: WorkerProcess) -> dict[str, dict[str, Any] | None]:
    """The tags changelog's last row per key (``None``: deleted), read raw."""
    topic = f"{worker.settings.worker.app_id}-tags-changelog"
    rows: dict[str, dict[str, Any] | None] = {}
    for message in read_to_end(settings.resolved_bootstrap_servers, topic):
        value = message.value()
        rows[(message.key() or b"").decode()] = json.loads(value) if value else None
    return rows


def wait_for_trim(settings: DcbSettings, worker: WorkerProcess, key: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        header = stored_rows(settings, worker).get(f"tag-tables:{key}")
        if header is not None and header.get("trimmed_through"):
            return header
        assert time.monotonic() < deadline, f"{key} was never trimmed"
        time.sleep(0.5)


def raw_answer(settings: DcbSettings, service: str, condition: AppendCondition) -> str | None:
    """The code a COMMIT sent as a raw command is answered with (None: committed)."""
    event = EventData(
        event_id=str(uuid.uuid4()),
        event_type="Subscribed",
        tags=["course:c1", "student:raw"],
        payload="{}",
        timestamp=datetime.now(UTC),
    )
    attempt = CommitAttempt(
        attempt_id=str(uuid.uuid4()), writer_epoch=0, events=[event], condition=condition
    )
    command = Command.of_commit(service, attempt)
    channel = CommitChannel(settings.resolved_bootstrap_servers, settings)
    try:
        result = channel.request(command, attempt.attempt_id, 60)
    finally:
        channel.close()
    return None if result.outcome == "COMMITTED" else (result.error.code if result.error else "?")


def test_tag_tables_drop_what_is_archived_and_conditions_below_it_are_read_over_the_archive(
    trim_settings: DcbSettings, trim_worker: WorkerProcess
) -> None:
    settings, service = trim_settings, f"trim-{uuid.uuid4().hex[:8]}"
    course = [QueryItem(types=["Subscribed"], tags=["course:c1"])]
    with DcbClient(service_id=service, settings=settings) as client:
        archived = subscribe(client, 6, "course:c1")
        through = certified(client, archived[-1])
        report = run_archive(settings, "--service", service, "--through", through)
        assert report["events"] == 6 and report["trim_requested"] is True

        # The changelog: the course's header says what it dropped; its rows are deleted.
        key = table_key(service, "course:c1")
        header = wait_for_trim(settings, trim_worker, key)
        assert header["trimmed_through"] == archived[-1]
        assert header["installed_offset"] == 6 and header["installed_count"] == 6
        rows = stored_rows(settings, trim_worker)
        assert all(rows[f"tag-installed:{key}/{i}"] is None for i in range(6))

        # The table refuses what it cannot check any more; what it can, it checks.
        assert raw_answer(settings, service, AppendCondition(fail_if_events_match=course)) == (
            "condition_below_archive"
        )
        below = AppendCondition(fail_if_events_match=course, after=archived[2])
        assert raw_answer(settings, service, below) == "condition_below_archive"
        at_trim = AppendCondition(fail_if_events_match=course, after=archived[-1])
        assert raw_answer(settings, service, at_trim) is None  # nothing after it: committed

        # Through the SDK: an archived match fails the append, no match commits it.
        late = DcbClient(service_id=service, settings=settings)  # reads archive + log
        with pytest.raises(AppendConditionFailed):
            late.append(
                [Event("Subscribed", {}, ["course:c1", "student:x"])],
                AppendCondition(fail_if_events_match=course, after=archived[0]),
            )
        cancelled = [QueryItem(types=["Cancelled"], tags=["course:c1"])]
        unique = AppendCondition(fail_if_events_match=cancelled)  # no position: refused first
        event = Event("Cancelled", {}, ["course:c1", "student:y"]).stored()
        first = str(uuid.uuid4())
        done = late.append([event], unique, attempt_id=first)
        # The same call again (its answer lost, say) is answered as the first time: the
        # read finds the attempt's own event, which is no match.
        again = late.append([event], unique, attempt_id=first)
        assert (again.attempt_id, again.suids) == (done.attempt_id, done.suids)
        late.close()

    # A worker started again restores the trimmed tables: the same refusal (for a query no
    # kept event matches: one that does fails as before, the table can tell).
    trim_worker.stop()
    trim_worker.start()
    nothing = [QueryItem(types=["Waitlisted"], tags=["course:c1"])]
    assert raw_answer(settings, service, AppendCondition(fail_if_events_match=nothing)) == (
        "condition_below_archive"
    )
    assert raw_answer(settings, service, AppendCondition(fail_if_events_match=course)) == (
        "append_condition_failed"  # the raw commit after the trim matches
    )

    # The log holds the archived events, the raw commit after the trim and the SDK's
    # repositioned one, nothing of what was refused.
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    events = read_to_end(settings.resolved_bootstrap_servers, topic)
    mine = [m for m in events if service.encode() in (m.value() or b"")]
    assert len(mine) - (6 - report["dropped"]) == 2
    assert any(done.suids[0].encode() in (m.value() or b"") for m in mine)
