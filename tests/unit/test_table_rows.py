"""Table rows are the JSON the rows were before (field names, not aliases), as bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from streams.model import table_rows
from streams.model.records import EventData


class _Pair(BaseModel):
    a: int
    b: str


def test_a_row_is_the_models_json_with_field_names_not_aliases() -> None:
    event = EventData(
        event_id="e1",
        event_type="Registered",
        payload="{}",
        tags=["t"],
        timestamp=datetime(2026, 12, 5, tzinfo=UTC),
    )
    row = table_rows.dump(event)
    assert isinstance(row, bytes)
    assert json.loads(row) == event.model_dump(mode="json")
    assert "event_id" in json.loads(row)
    assert EventData.model_validate_json(row) == event


def test_extra_fields_join_the_object_and_excluded_ones_leave_it() -> None:
    pair = _Pair(a=1, b="x")
    row = table_rows.dump(pair, exclude={"b"}, extra={"count": 2, "ids": ["p", "q"]})
    assert table_rows.load(row) == {"a": 1, "count": 2, "ids": ["p", "q"]}
    everything_out = table_rows.dump(pair, exclude={"a", "b"}, extra={"count": 0})
    assert table_rows.load(everything_out) == {"count": 0}
    assert table_rows.load(table_rows.dump(pair, exclude={"a", "b"})) == {}


@pytest.mark.parametrize("row", [b"[1, 2]", b'"text"', b"3"])
def test_a_row_that_is_not_an_object_is_refused(row: bytes) -> None:
    with pytest.raises(ValueError, match="JSON object"):
        table_rows.load(row)
