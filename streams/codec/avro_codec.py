"""Encode and decode records as Avro single-object encoding or the Confluent wire format.

Both framings are told apart by their first byte (0xC3 vs 0x00), so a reader
decodes either whatever the writer's configuration was. Every failure is a
typed :class:`~streams.errors.CodecError` with a stable code, never a bare
fastavro exception, so processors can dead-letter it with its reason.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import parse_schema, to_parsing_canonical_form
from fastavro.validation import ValidationError, validate

from streams.codec.catalog import SchemaCatalog, SchemaEntry, crc64_avro_fingerprint
from streams.codec.registry import SchemaRegistryClient
from streams.errors import (
    InvalidRecordError,
    MalformedRecordError,
    UnexpectedSchemaError,
    UnknownSchemaError,
)
from streams.settings import DcbSettings

SOE_MARKER = b"\xc3\x01"
SOE_HEADER_LEN = len(SOE_MARKER) + 8
CONFLUENT_MAGIC = b"\x00"
CONFLUENT_HEADER_LEN = 5


@dataclass(frozen=True)
class Decoded:
    """A decoded record and the full name of the schema it was written with."""

    schema_name: str
    value: dict[str, Any]


class AvroCodec:
    """Turns records (plain dicts shaped like their Avro schema) into bytes and back."""

    def __init__(
        self, catalog: SchemaCatalog, registry: SchemaRegistryClient | None = None
    ) -> None:
        self.catalog = catalog
        self.registry = registry
        # A registry id names one schema for ever: resolved once (name, writer, reader).
        self._registry_ids: dict[int, tuple[str, Any, Any | None]] = {}

    # --- encode --------------------------------------------------------------
    def encode(self, schema_name: str, record: dict[str, Any], *, check: bool = True) -> bytes:
        """The framed bytes of ``record``, checked against its schema first.

        ``check=False`` is for what a record model of this schema has just dumped
        (``AvroRecord.to_avro``), the processors' hot path: the check is two thirds of
        the cost, and for model dumps it changes nothing (a property test shows it); such
        a record's union values are written with their branch named (:mod:`.union_branches`).
        """
        entry = self.catalog.get(schema_name)
        if check:
            self._check(entry, schema_name, record)
        elif entry.name_branches is not None:
            record = entry.name_branches(record)
        buf = io.BytesIO()
        buf.write(self._header(entry))
        schemaless_writer(buf, entry.parsed, record)
        return buf.getvalue()

    @staticmethod
    def _check(entry: SchemaEntry, schema_name: str, record: dict[str, Any]) -> None:
        try:
            validate(record, entry.parsed, raise_errors=True, strict=True)
        except (ValidationError, TypeError, ValueError, KeyError) as exc:
            raise InvalidRecordError(
                f"record does not conform to {schema_name}: {exc}", schema=schema_name
            ) from None
        if unknown := unknown_fields(entry.parsed, record, entry.named_types):
            raise InvalidRecordError(
                f"record has fields {schema_name} does not define: {', '.join(unknown)}",
                schema=schema_name,
                unknownFields=unknown,
            )

    def _header(self, entry: SchemaEntry) -> bytes:
        if self.registry is None:
            return SOE_MARKER + entry.fingerprint
        schema_id = self.registry.register(entry.name, entry.schema_json)
        return CONFLUENT_MAGIC + struct.pack(">I", schema_id)

    # --- decode --------------------------------------------------------------
    def decode(self, data: bytes | None, expected: str | None = None) -> Decoded:
        """Decode ``data``; with ``expected``, bytes of any other schema are refused."""
        if not data:
            raise MalformedRecordError("empty record value: no Avro header")
        if data[:2] == SOE_MARKER:
            if len(data) < SOE_HEADER_LEN:
                raise MalformedRecordError("truncated single-object header")
            entry = self.catalog.by_fingerprint(data[2:SOE_HEADER_LEN])
            # The writer's schema is the reader's: no resolution (it cost ~40% of a decode).
            writer, reader = entry.parsed, None
            name, body = entry.name, data[SOE_HEADER_LEN:]
        elif data[:1] == CONFLUENT_MAGIC and len(data) >= CONFLUENT_HEADER_LEN:
            (schema_id,) = struct.unpack(">I", data[1:CONFLUENT_HEADER_LEN])
            name, writer, reader = self._registry_schemas(schema_id)
            body = data[CONFLUENT_HEADER_LEN:]
        else:
            raise MalformedRecordError(
                "bytes are neither Avro single-object encoding nor the Confluent wire format",
                head=data[:4].hex(),
            )
        if expected is not None and name != expected:
            raise UnexpectedSchemaError(
                f"expected a {expected} record, got {name}", expected=expected, actual=name
            )
        return Decoded(name, self._read_body(name, body, writer, reader))

    def _registry_schemas(self, schema_id: int) -> tuple[str, Any, Any | None]:
        """The schema name, writer and reader of a registry id, parsed at its first record
        (parsing it per record cost more than decoding it). A writer schema that is the
        catalog's own (same fingerprint) is read without resolution, as single-object
        encoding is."""
        known = self._registry_ids.get(schema_id)
        if known is None:
            known = self._registry_ids[schema_id] = self._resolve_registry_id(schema_id)
        return known

    def _resolve_registry_id(self, schema_id: int) -> tuple[str, Any, Any | None]:
        if self.registry is None:
            raise UnknownSchemaError(
                f"record names registry schema id {schema_id}, but no schema registry "
                "is configured (set DCB_SCHEMA_REGISTRY_URL)",
                schema_id=schema_id,
            )
        writer = parse_schema(json.loads(self.registry.schema_by_id(schema_id)), named_schemas={})
        name = writer.get("name") if isinstance(writer, dict) else None
        if not isinstance(name, str) or not self.catalog.has(name):
            raise UnknownSchemaError(
                f"registry schema id {schema_id} ({name}) is not one of dcb-streams' schemas",
                schema_id=schema_id,
            )
        entry = self.catalog.get(name)
        if crc64_avro_fingerprint(to_parsing_canonical_form(writer)) == entry.fingerprint:
            return name, entry.parsed, None
        return name, writer, entry.parsed

    @staticmethod
    def _read_body(name: str, body: bytes, writer: Any, reader: Any | None) -> dict[str, Any]:
        buf = io.BytesIO(body)
        try:
            value = schemaless_reader(buf, writer, reader)
        except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, ...
            raise MalformedRecordError(
                f"{name} body is not valid Avro: {type(exc).__name__}: {exc}", schema=name
            ) from None
        if buf.tell() != len(body):
            raise MalformedRecordError(
                f"{name} body has {len(body) - buf.tell()} trailing bytes", schema=name
            )
        if not isinstance(value, dict):
            raise MalformedRecordError(f"{name} body did not decode to a record", schema=name)
        return value


def unknown_fields(schema: Any, datum: Any, named: dict[str, Any], path: str = "") -> list[str]:
    """Paths of keys in ``datum`` that its schema has no field for (fastavro ignores them,
    which would silently drop a client's misspelt data)."""
    if isinstance(schema, str):
        return unknown_fields(named[schema], datum, named, path) if schema in named else []
    if isinstance(schema, list):
        if not isinstance(datum, dict):
            return []
        candidates = [
            unknown_fields(branch, datum, named, path)
            for branch in schema
            if _is_record(branch, named)
        ]
        return min(candidates, key=len, default=[])
    kind = schema.get("type")
    if kind == "record" and isinstance(datum, dict):
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        out = [f"{path}{key}" for key in datum if key not in fields]
        for name, field_type in fields.items():
            if name in datum:
                out += unknown_fields(field_type, datum[name], named, f"{path}{name}.")
        return out
    if kind == "array" and isinstance(datum, list):
        return [
            p
            for i, item in enumerate(datum)
            for p in unknown_fields(schema["items"], item, named, f"{path}{i}.")
        ]
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in named):
        return unknown_fields(kind, datum, named, path)
    return []


def _is_record(schema: Any, named: dict[str, Any]) -> bool:
    resolved = named.get(schema, schema) if isinstance(schema, str) else schema
    return isinstance(resolved, dict) and resolved.get("type") == "record"


def codec_from_settings(settings: DcbSettings) -> AvroCodec:
    registry = (
        SchemaRegistryClient(settings.schema_registry_url) if settings.schema_registry_url else None
    )
    return AvroCodec(SchemaCatalog(settings.schema_dir), registry)
