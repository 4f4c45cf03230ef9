"""The Avro schemas of ``schemas/``, parsed once and indexed by name and fingerprint."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

from streams.codec.union_branches import Namer, branch_namer
from streams.errors import UnknownSchemaError


def bundled_schema_dir() -> Path:
    """``schemas/`` of a source checkout, or the copy packed into the wheel."""
    package_dir = Path(__file__).resolve().parents[1]
    for candidate in (package_dir.parent / "schemas", package_dir / "_schemas"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("no schemas/ folder next to the streams package")


@dataclass(frozen=True)
class SchemaEntry:
    """One parsed schema with the identity facts the encodings need."""

    name: str
    parsed: Any
    named_types: dict[str, Any]  # every named type the schema defines, by full name
    schema_json: str  # the full schema with docs and logical types (what a registry stores)
    canonical_form: str
    fingerprint: bytes  # CRC-64-AVRO, little-endian, as single-object encoding writes it
    name_branches: Namer | None  # a model dump with its union branches named (None: none)

    @property
    def fingerprint_int(self) -> int:
        return int.from_bytes(self.fingerprint, "little")


def crc64_avro_fingerprint(canonical_form: str) -> bytes:
    """The 8 bytes single-object encoding puts after its marker (little-endian)."""
    return bytes.fromhex(fingerprint(canonical_form, "CRC-64-AVRO"))


class SchemaCatalog:
    """Every ``<namespace>.<Name>.avsc`` of one folder; named types resolve across files."""

    def __init__(self, schema_dir: Path | None = None) -> None:
        self.schema_dir = schema_dir or bundled_schema_dir()
        self._by_name: dict[str, SchemaEntry] = {}
        self._by_fingerprint: dict[bytes, SchemaEntry] = {}
        for path in sorted(self.schema_dir.glob("*.avsc")):
            named_types: dict[str, Any] = {}
            parsed = load_schema(str(path), named_schemas=named_types)
            canonical = to_parsing_canonical_form(parsed)
            plain = cast(
                dict[str, Any], load_schema(str(path), named_schemas={}, _write_hint=False)
            )
            entry = SchemaEntry(
                name=str(plain["name"]),
                parsed=parsed,
                named_types=named_types,
                schema_json=json.dumps(plain, separators=(",", ":")),
                canonical_form=canonical,
                fingerprint=crc64_avro_fingerprint(canonical),
                name_branches=branch_namer(parsed, named_types),
            )
            self._by_name[entry.name] = entry
            self._by_fingerprint[entry.fingerprint] = entry

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def get(self, name: str) -> SchemaEntry:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownSchemaError(f"no schema named {name!r} in {self.schema_dir}") from None

    def has(self, name: str) -> bool:
        return name in self._by_name

    def by_fingerprint(self, fp: bytes) -> SchemaEntry:
        try:
            return self._by_fingerprint[fp]
        except KeyError:
            raise UnknownSchemaError(
                f"no schema in {self.schema_dir} has fingerprint {fp.hex()}",
                fingerprint=fp.hex(),
            ) from None
