"""A registry for the sink tests: the demo's read models, and one whose rows get deleted
(a course leaves the list of open courses when its last seat goes)."""

from __future__ import annotations

from streams.demo.projections import SUBSCRIPTIONS, course_rosters
from streams.projections.api import ProjectedEvent, ProjectorRegistry, Row, TagProjector
from tests.integration.load import CAPACITY


def _open(row: Row, event: ProjectedEvent) -> Row | None:
    taken = row.get("seats_taken", 0) + 1
    return None if taken >= CAPACITY else {"course": event.data["course"], "seats_taken": taken}


open_courses = TagProjector(
    id="open-courses", query=SUBSCRIPTIONS, tag_prefix="course:", fold=_open
)

registry = ProjectorRegistry([course_rosters, open_courses])
