"""A projection row survives its topic format, and the format is what Connect expects."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.projections.row_format import (
    JSON_NAME,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
nested = st.recursive(scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner))
rows = st.dictionaries(st.text(min_size=1), nested)


@given(st.text(), rows)
def test_a_row_reads_back_as_written(row_id: str, row: dict[str, Any]) -> None:
    assert decode_key(encode_key(row_id)) == row_id
    assert decode_value(encode_value(row)) == row


def test_columns_carry_connect_types() -> None:
    value = json.loads(encode_value({"n": 3, "x": 1.5, "ok": True, "s": "a", "l": [1, 2]}))
    types = {f["field"]: (f["type"], f.get("name")) for f in value["schema"]["fields"]}
    assert types == {
        "n": ("int64", None),
        "x": ("double", None),
        "ok": ("boolean", None),
        "s": ("string", None),
        "l": ("string", JSON_NAME),
    }
    assert value["payload"]["l"] == "[1,2]"
    key = json.loads(encode_key("s1/course:c1"))
    assert key["schema"]["type"] == "struct" and key["payload"] == {"row_id": "s1/course:c1"}
