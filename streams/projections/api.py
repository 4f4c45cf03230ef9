"""What a projection is: an id, the events it reads, and a pure fold of them into rows.

A read model is a set of rows (JSON objects) keyed by a row id. A projector says which
rows an event touches (``keys``), what a row starts as, and how an event changes it;
``None`` deletes the row. Two forms cover most read models:

- :class:`TagProjector`: one row per tag with a prefix (``course:c1`` → the course's row),
  keyed ``<service>/<tag>``;
- :class:`ServiceProjector`: one row per service, keyed by the service id.

Projectors are registered explicitly in a :class:`ProjectorRegistry`, which ``dcb
project --app module:attribute`` loads the way ``uvicorn`` loads an app.
"""

from __future__ import annotations

import copy
import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from streams.model.query import query_matches
from streams.model.records import CommittedEvent, QueryItem
from streams.projections.exceptions import (
    DuplicateProjectionError,
    InvalidProjectionIdError,
    RegistryLoadError,
    UnknownProjectionError,
)

Row = dict[str, Any]
_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")


@dataclass(frozen=True)
class ProjectedEvent:
    """An event as a fold sees it: its payload already parsed."""

    service_id: str
    position: str  # the SUID
    event_type: str
    tags: tuple[str, ...]
    data: Any
    timestamp: datetime

    @classmethod
    def of(cls, record: CommittedEvent) -> ProjectedEvent:
        e = record.event
        return cls(record.service_id, record.suid, e.event_type, tuple(e.tags), e.data, e.timestamp)


class Projector(ABC):
    """The fold of one read model. Folds must be pure: a rebuild replays them."""

    id: str
    query: tuple[QueryItem, ...]

    def matches(self, event: ProjectedEvent) -> bool:
        return query_matches(self.query, event.event_type, event.tags)

    @abstractmethod
    def keys(self, event: ProjectedEvent) -> Iterable[str]:
        """The ids of the rows ``event`` changes."""

    @abstractmethod
    def initial(self, key: str) -> Row:
        """A row before any event changed it."""

    @abstractmethod
    def apply(self, row: Row, event: ProjectedEvent) -> Row | None:
        """The row after ``event`` (``None``: the row is deleted)."""


def valid_id(projection_id: str) -> bool:
    return _ID.fullmatch(projection_id) is not None


def _check_id(projection_id: str) -> None:
    if not valid_id(projection_id):
        raise InvalidProjectionIdError(
            f"projection id {projection_id!r} must be 1-100 of a-z, 0-9, '.', '_', '-' "
            "(it names a topic), starting with a letter or digit",
            projection_id=projection_id,
        )


Fold = Callable[[Row, ProjectedEvent], Row | None]


@dataclass(frozen=True, kw_only=True)
class FoldProjector(Projector):
    """A projector from a fold function; ``initial_row`` is copied for each new row."""

    id: str
    query: tuple[QueryItem, ...]
    fold: Fold
    initial_row: Row = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_id(self.id)

    def initial(self, key: str) -> Row:
        return copy.deepcopy(self.initial_row)

    def apply(self, row: Row, event: ProjectedEvent) -> Row | None:
        return self.fold(row, event)


@dataclass(frozen=True, kw_only=True)
class TagProjector(FoldProjector):
    """One row per tag starting with ``tag_prefix``: the fold of the matching events that
    carry it."""

    tag_prefix: str

    def keys(self, event: ProjectedEvent) -> list[str]:
        return [f"{event.service_id}/{t}" for t in event.tags if t.startswith(self.tag_prefix)]


@dataclass(frozen=True, kw_only=True)
class ServiceProjector(FoldProjector):
    """One row per service: the fold of every matching event of the service."""

    def keys(self, event: ProjectedEvent) -> list[str]:
        return [event.service_id]


class ProjectorRegistry:
    """The projectors a runner serves, by id (ids unique)."""

    def __init__(self, projectors: Sequence[Projector] = ()) -> None:
        self._by_id: dict[str, Projector] = {}
        for projector in projectors:
            self.register(projector)

    def register(self, projector: Projector) -> Projector:
        _check_id(projector.id)
        if projector.id in self._by_id:
            raise DuplicateProjectionError(
                f"projection id {projector.id!r} is registered twice", projection_id=projector.id
            )
        self._by_id[projector.id] = projector
        return projector

    def get(self, projection_id: str) -> Projector:
        try:
            return self._by_id[projection_id]
        except KeyError:
            raise UnknownProjectionError(
                f"no projection {projection_id!r} (registered: {', '.join(self._by_id) or 'none'})",
                projection_id=projection_id,
            ) from None

    def ids(self) -> list[str]:
        return list(self._by_id)

    def __iter__(self) -> Iterator[Projector]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)


def load_registry(spec: str) -> ProjectorRegistry:
    """The registry named ``module:attribute`` (imported as ``uvicorn`` imports an app)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise RegistryLoadError(
            f"--app takes module:attribute (e.g. myapp.projections:registry), got {spec!r}",
            app=spec,
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryLoadError(f"cannot import {module_name}: {exc}", app=spec) from exc
    registry = getattr(module, attribute, None)
    if not isinstance(registry, ProjectorRegistry):
        raise RegistryLoadError(
            f"{spec} is {type(registry).__name__}, not a ProjectorRegistry", app=spec
        )
    return registry
