"""The handover of an answer from the client's listener to the writer awaiting it."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from streams.errors import KafkaUnavailableError
from streams.model.records import CommitResult
from streams.sdk.client import _Answer


def result() -> CommitResult:
    return CommitResult(
        service_id="s",
        attempt_id="a",
        outcome="COMMITTED",
        suids=["1"],
        decided_at=datetime.now(UTC),
    )


def test_a_writer_gets_the_answer_settled_while_it_waits() -> None:
    answer, expected = _Answer(), result()
    threading.Timer(0.05, answer.settle, kwargs={"result": expected}).start()
    started = time.monotonic()
    assert answer.wait(5) is expected
    assert time.monotonic() - started < 2


def test_a_failed_send_reaches_the_writer_as_its_error() -> None:
    answer = _Answer()
    answer.settle(error=KafkaUnavailableError("sending the attempt: broker down"))
    with pytest.raises(KafkaUnavailableError, match="broker down"):
        answer.wait(1)


def test_no_answer_in_time_is_a_timeout() -> None:
    answer = _Answer()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        answer.wait(0.1)
    assert time.monotonic() - started >= 0.1
