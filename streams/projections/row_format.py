"""How a projection's row is written on its topic: Kafka Connect's JSON with a schema.

One format serves both readers of the row topic: the runner restoring its state, and a
Kafka Connect sink (``JsonConverter`` with ``schemas.enable=true``), which needs a schema
to make columns. The key is a struct ``{row_id}`` (a JDBC sink's primary key; a bare
string key is refused by the Debezium JDBC sink). The value's fields are the row's:
strings, booleans, 64-bit integers and doubles as such; lists and objects as JSON text
named ``io.debezium.data.Json`` (a ``jsonb`` column in PostgreSQL), parsed back on
restore; every field optional, so a later row may add a column. A deleted row is a
tombstone (no value).
"""

from __future__ import annotations

import json
from typing import Any

from streams.projections.api import Row

KEY_FIELD = "row_id"
JSON_NAME = "io.debezium.data.Json"
_KEY_SCHEMA = {
    "type": "struct",
    "name": "dcb.projection.RowKey",
    "optional": False,
    "fields": [{"field": KEY_FIELD, "type": "string", "optional": False}],
}


def _field(name: str, value: Any) -> tuple[dict[str, Any], Any]:
    """The Connect schema of one field and the value as written."""
    if isinstance(value, bool):
        return {"field": name, "type": "boolean", "optional": True}, value
    if isinstance(value, int):
        return {"field": name, "type": "int64", "optional": True}, value
    if isinstance(value, float):
        return {"field": name, "type": "double", "optional": True}, value
    if isinstance(value, str) or value is None:
        return {"field": name, "type": "string", "optional": True}, value
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return {"field": name, "type": "string", "optional": True, "name": JSON_NAME}, text


def encode_key(row_id: str) -> bytes:
    return json.dumps({"schema": _KEY_SCHEMA, "payload": {KEY_FIELD: row_id}}).encode()


def encode_value(row: Row) -> bytes:
    fields, payload = [], {}
    for name in sorted(row):
        schema, payload[name] = _field(name, row[name])
        fields.append(schema)
    schema = {"type": "struct", "name": "dcb.projection.Row", "optional": False, "fields": fields}
    return json.dumps({"schema": schema, "payload": payload}, sort_keys=True).encode()


def decode_key(data: bytes) -> str:
    return str(json.loads(data)["payload"][KEY_FIELD])


def decode_value(data: bytes) -> Row:
    envelope = json.loads(data)
    payload: dict[str, Any] = envelope["payload"]
    for schema in envelope["schema"]["fields"]:
        name = schema["field"]
        if schema.get("name") == JSON_NAME and payload.get(name) is not None:
            payload[name] = json.loads(payload[name])
    return payload
