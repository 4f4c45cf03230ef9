"""Walking a class hierarchy: how record types and error codes are looked up by name."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def subclass_tree(root: type[T]) -> list[type[T]]:
    """``root`` and every class below it, parents before children."""
    found: list[type[T]] = []
    pending = [root]
    while pending:
        cls = pending.pop(0)
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found
