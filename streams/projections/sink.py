"""The Kafka Connect sink of a projection: its connector config, from ``connectors/``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from string import Template

from streams.projections.runner import rows_topic
from streams.settings import DcbSettings

_PACKAGE = Path(__file__).resolve().parents[1]
# ``connectors/`` of a source checkout, or the copy packed into the wheel.
CONNECTORS = next(
    (d for d in (_PACKAGE.parent / "connectors", _PACKAGE / "_connectors") if d.is_dir()),
    _PACKAGE.parent / "connectors",
)
TEMPLATE = CONNECTORS / "projection-postgres.json"


def table_name(projection_id: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", projection_id)


def connector_name(projection_id: str) -> str:
    return f"dcb-sink-{projection_id}"


def sink_config(
    settings: DcbSettings, projection_id: str, template: Path = TEMPLATE
) -> dict[str, str]:
    """The template with its placeholders filled in for ``projection_id``."""
    c = settings.connect
    values = {
        "topic": rows_topic(settings, projection_id),
        "table": table_name(projection_id),
        "jdbc_url": c.jdbc_url,
        "jdbc_user": c.jdbc_user,
        "jdbc_password": c.jdbc_password,
    }
    escaped = {k: json.dumps(v)[1:-1] for k, v in values.items()}
    config: dict[str, str] = json.loads(Template(template.read_text()).substitute(escaped))
    return config
