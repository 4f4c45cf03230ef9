"""A client call's steps run the same whether their waits block or are awaited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.errors import AnswerTimeoutError
from streams.sdk import steps


def resent_once() -> steps.Steps[str]:
    """The shape of ``DcbClient._committing``: a silence is answered by one resend."""
    try:
        answer = yield steps.EndsAsked()
    except AnswerTimeoutError:
        answer = yield steps.EndsAsked()
    return f"got {answer}"


def served(replies: list[Any]) -> tuple[Any, Any]:
    """A blocking and an awaiting server handing out ``replies`` (raising the errors)."""

    def serve(_wait: steps.Wait) -> Any:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def serve_async(wait: steps.Wait) -> Any:
        await asyncio.sleep(0)
        return serve(wait)

    return serve, serve_async


@pytest.mark.parametrize("awaited", [False, True])
def test_an_error_of_a_wait_is_thrown_into_the_steps_and_the_result_returned(
    awaited: bool,
) -> None:
    serve, serve_async = served([AnswerTimeoutError("silence"), "the answer"])
    if awaited:
        outcome = asyncio.run(steps.run_async(resent_once(), serve_async))
    else:
        outcome = steps.run(resent_once(), serve)
    assert outcome == "got the answer"


@pytest.mark.parametrize("awaited", [False, True])
def test_an_error_the_steps_do_not_handle_reaches_the_caller(awaited: bool) -> None:
    serve, serve_async = served([AnswerTimeoutError("silence"), AnswerTimeoutError("again")])
    with pytest.raises(AnswerTimeoutError, match="again"):
        if awaited:
            asyncio.run(steps.run_async(resent_once(), serve_async))
        else:
            steps.run(resent_once(), serve)
