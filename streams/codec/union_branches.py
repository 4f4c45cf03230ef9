"""Naming, for fastavro, the branch each union value takes.

Given a plain value for a union, fastavro validates it against each branch in turn to find
one it fits; for a record in a union in a record that is a validation of the whole
subtree at every level (a third of the time of encoding a command). A value given as
``(name, value)`` takes the named branch at once. The schemas use unions of null and one
other type; those are named here, once per schema, and every other value passes as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Namer = Callable[[Any], Any]
_NAMED = ("record", "enum", "fixed")


def branch_namer(schema: Any, named_types: dict[str, Any]) -> Namer | None:
    """What turns a value of ``schema`` into one with its union branches named; ``None``
    when nothing in it needs naming."""
    return _namer(schema, named_types, frozenset())


def _namer(schema: Any, named: dict[str, Any], building: frozenset[str]) -> Namer | None:
    if isinstance(schema, str):
        if schema not in named or schema in building:  # a primitive, or a recursive type
            return None
        return _namer(named[schema], named, building | {schema})
    if isinstance(schema, list):
        return _union(schema, named, building)
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "record":
        return _record(schema, named, building | {schema["name"]})
    if kind == "array" and (items := _namer(schema["items"], named, building)) is not None:
        return lambda value: [items(v) for v in value]
    if kind == "map" and (values := _namer(schema["values"], named, building)) is not None:
        return lambda value: {k: values(v) for k, v in value.items()}
    return None


def _union(branches: list[Any], named: dict[str, Any], building: frozenset[str]) -> Namer | None:
    others = [b for b in branches if b != "null"]
    if len(branches) != 2 or len(others) != 1:
        return None  # fastavro finds the branch itself
    branch = others[0]
    name = _name(branch, named)
    inner = _namer(branch, named, building)
    if name is None:
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if inner is None:
        return lambda v: None if v is None else (name, v)
    return lambda v: None if v is None else (name, inner(v))


def _record(
    schema: dict[str, Any], named: dict[str, Any], building: frozenset[str]
) -> Namer | None:
    fields = [
        (field["name"], namer)
        for field in schema["fields"]
        if (namer := _namer(field["type"], named, building)) is not None
    ]
    if not fields:
        return None

    def record(value: dict[str, Any]) -> dict[str, Any]:
        out = dict(value)
        for key, namer in fields:
            if key in out:
                out[key] = namer(out[key])
        return out

    return record


def _name(branch: Any, named: dict[str, Any]) -> str | None:
    """The full name a union branch is known by, if it is a named type."""
    if isinstance(branch, str):
        return branch if branch in named else None
    if isinstance(branch, dict) and branch.get("type") in _NAMED:
        return str(branch["name"])
    return None
