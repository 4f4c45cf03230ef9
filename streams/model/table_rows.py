"""How a model is kept as a table row: JSON bytes, made by pydantic.

A row as a dict of dicts cost the step pydantic's dump to JSON-ready Python and then a
JSON encoder (about 93 µs per ledger step with 64 attempts in flight, against 17 µs
serialised once by pydantic). And every row a table holds stayed in memory as a tree of
containers that Python's cyclic collector walked at each full collection: as tables
grew, a collection paused the worker for up to 160 ms (8 and 64 writers), long enough to
show in the commit p99. Bytes are one object the collector never looks into.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic_core


def dump(
    model: object,
    *,
    exclude: set[str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """``model`` (a pydantic model or dataclass) as a JSON object without the ``exclude``
    fields and with the ``extra`` ones (whose names must not be fields of the model)."""
    body = pydantic_core.to_json(model, exclude=exclude, by_alias=False)
    if not extra:
        return body
    more = pydantic_core.to_json(dict(extra))
    return more if body == b"{}" else body[:-1] + b"," + more[1:]


def load(row: bytes) -> dict[str, Any]:
    """A row's JSON object."""
    value = pydantic_core.from_json(row)
    if not isinstance(value, dict):
        raise ValueError(f"a table row is a JSON object, not {type(value).__name__}")
    return value
