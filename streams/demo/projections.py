"""The course-subscription read models: what ``dcb project --app
streams.demo.projections:registry`` runs, and the shape of a registry of your own."""

from __future__ import annotations

from streams.model.records import QueryItem
from streams.projections.api import (
    ProjectedEvent,
    ProjectorRegistry,
    Row,
    ServiceProjector,
    TagProjector,
)

SUBSCRIPTIONS = (QueryItem(types=["StudentSubscribed"]),)


def _roster(row: Row, event: ProjectedEvent) -> Row:
    """A course's students in the order they subscribed (SUID order)."""
    students = [*row.get("students", []), event.data["student"]]
    return {"course": event.data["course"], "students": students, "last_position": event.position}


def _totals(row: Row, event: ProjectedEvent) -> Row:
    return {"subscriptions": row.get("subscriptions", 0) + 1, "last_position": event.position}


course_rosters = TagProjector(
    id="course-rosters", query=SUBSCRIPTIONS, tag_prefix="course:", fold=_roster
)
subscription_totals = ServiceProjector(id="subscription-totals", query=SUBSCRIPTIONS, fold=_totals)

registry = ProjectorRegistry([course_rosters, subscription_totals])
