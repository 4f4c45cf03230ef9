"""A minimal client of the Confluent Schema Registry REST API (register, fetch by id).

Subjects follow the record-name strategy (subject = the record's full name),
so a schema is registered once whatever topic carries it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from streams.errors import SchemaRegistryError

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryClient:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._ids_by_subject_schema: dict[tuple[str, str], int] = {}
        self._schemas_by_id: dict[int, str] = {}

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise SchemaRegistryError(
                f"schema registry answered {exc.code} to {method} {path}",
                status=exc.code,
                body=exc.read().decode(errors="replace")[:1000],
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SchemaRegistryError(f"schema registry at {self.url} unreachable: {exc}") from None

    def register(self, subject: str, schema_json: str) -> int:
        """The registry id of ``schema_json`` under ``subject`` (registered when new)."""
        key = (subject, schema_json)
        if key not in self._ids_by_subject_schema:
            answer = self._request("POST", f"/subjects/{subject}/versions", {"schema": schema_json})
            schema_id = int(answer["id"])
            self._ids_by_subject_schema[key] = schema_id
            self._schemas_by_id[schema_id] = schema_json
        return self._ids_by_subject_schema[key]

    def schema_by_id(self, schema_id: int) -> str:
        if schema_id not in self._schemas_by_id:
            answer = self._request("GET", f"/schemas/ids/{schema_id}")
            self._schemas_by_id[schema_id] = str(answer["schema"])
        return self._schemas_by_id[schema_id]
