"""An answer's error code comes back to the caller as the typed error of that code."""

from __future__ import annotations

from streams.errors import AppendConditionFailed, DcbError, StaleFenceError, TooManyTagsError
from streams.model.records import ErrorInfo
from streams.sdk.client import error_from


def test_known_codes_become_their_classes_with_details() -> None:
    error = error_from(
        ErrorInfo(code="append_condition_failed", message="m", details_json='{"tag": "t"}')
    )
    assert type(error) is AppendConditionFailed and error.details == {"tag": "t"}
    assert type(error_from(ErrorInfo(code="stale_fence", message="m"))) is StaleFenceError
    assert type(error_from(ErrorInfo(code="too_many_tags", message="m"))) is TooManyTagsError


def test_an_unknown_code_is_kept() -> None:
    error = error_from(ErrorInfo(code="from_the_future", message="new"))
    assert isinstance(error, DcbError) and error.code == "from_the_future"
    assert error.message == "new"


def test_every_fencing_is_one_stale_fence_error_saying_what_and_which_tokens() -> None:
    from streams.projections.exceptions import ProjectionFencedError

    sent = StaleFenceError.of("service s (writer epoch)", 3, 5)
    received = error_from(ErrorInfo.of(sent))
    assert type(received) is StaleFenceError and received.code == "stale_fence"
    assert received.details == {"fenced": "service s (writer epoch)", "stale": 3, "current": 5}
    assert "holds 3" in received.message and "is 5" in received.message
    projection = ProjectionFencedError.of("projection p", "writer-a", None)
    assert isinstance(projection, StaleFenceError) and projection.code == "stale_fence"
    assert type(error_from(ErrorInfo.of(projection))) is StaleFenceError
