"""Digests are over one canonical JSON form; stored digests must keep matching it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.model.digests import canonical_json

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_canonical_json_is_sorted_compact_unescaped_json(value: Any) -> None:
    """The form every digest ever stored was taken over: ``json.dumps`` with sorted keys,
    no spaces and non-ASCII as is, in UTF-8."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected.encode()
