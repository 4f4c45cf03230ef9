"""The Avro codec: round trips, framing, and a typed error for every kind of bad bytes."""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from fastavro import schemaless_writer
from fastavro.schema import load_schema, parse_schema
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.codec import AvroCodec, SchemaCatalog
from streams.codec.avro_codec import SOE_MARKER
from streams.codec.catalog import crc64_avro_fingerprint
from streams.codec.registry import SchemaRegistryClient
from streams.errors import (
    CodecError,
    InvalidRecordError,
    MalformedRecordError,
    SchemaRegistryError,
    UnexpectedSchemaError,
    UnknownSchemaError,
)
from streams.model.records import AvroRecord, Certificate, CommitResult, record_types
from tests.strategies import ALL_RECORDS, samples

CATALOG = SchemaCatalog()
CODEC = AvroCodec(CATALOG)


@settings(max_examples=300, deadline=None)
@given(st.one_of(*ALL_RECORDS.values()))
def test_every_record_type_round_trips(record: AvroRecord) -> None:
    data = CODEC.encode(record.schema_name, record.to_avro())
    decoded = CODEC.decode(data, expected=record.schema_name)
    assert decoded.schema_name == record.schema_name
    assert type(record).from_avro(decoded.value) == record


@settings(max_examples=300, deadline=None)
@given(st.one_of(*ALL_RECORDS.values()))
def test_a_model_dump_encodes_the_same_unchecked(record: AvroRecord) -> None:
    """Why processors may skip the schema check for what their models dump."""
    checked = CODEC.encode(record.schema_name, record.to_avro())
    assert CODEC.encode(record.schema_name, record.to_avro(), check=False) == checked


@pytest.mark.parametrize(
    ("canonical", "signed_fingerprint"),
    [
        # Apache Avro's published vectors (share/test/data/schema-tests.txt), signed 64-bit.
        ('"null"', 7195948357588979594),
        ('"boolean"', -6970731678124411036),
        ('"int"', 8247732601305521295),
        ('"long"', -3434872931120570953),
        ('"string"', -8142146995180207161),
    ],
)
def test_crc64_avro_matches_the_avro_specification_vectors(
    canonical: str, signed_fingerprint: int
) -> None:
    assert crc64_avro_fingerprint(canonical) == struct.pack("<q", signed_fingerprint)


def test_single_object_header_is_marker_then_little_endian_fingerprint() -> None:
    record = samples()[6]
    data = CODEC.encode(record.schema_name, record.to_avro())
    entry = CATALOG.get(record.schema_name)
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == struct.pack("<Q", entry.fingerprint_int)


def test_catalog_holds_one_schema_per_file_with_distinct_fingerprints() -> None:
    files = sorted(p.name.removesuffix(".avsc") for p in CATALOG.schema_dir.glob("*.avsc"))
    assert CATALOG.names() == files
    fingerprints = {CATALOG.get(n).fingerprint for n in files}
    assert len(fingerprints) == len(files)


def _fields(schema: Any, out: dict[str, list[dict[str, Any]]]) -> None:
    """Collect every record's fields, descending into nested named types."""
    if isinstance(schema, list):
        for branch in schema:
            _fields(branch, out)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            out[schema["name"]] = schema["fields"]
            for field in schema["fields"]:
                _fields(field["type"], out)
        elif schema.get("type") == "array":
            _fields(schema["items"], out)


def _all_record_fields() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for path in CATALOG.schema_dir.glob("*.avsc"):
        _fields(load_schema(str(path), named_schemas={}, _write_hint=False), out)
    return out


def test_every_schema_field_is_documented() -> None:
    undocumented = [
        f"{record}.{field['name']}"
        for record, fields in _all_record_fields().items()
        for field in fields
        if not field.get("doc")
    ]
    assert undocumented == []


def test_pydantic_models_mirror_the_avro_records() -> None:
    fields = _all_record_fields()
    models = record_types()
    assert set(models) == set(fields)
    for name, cls in models.items():
        aliases = [f.alias for f in cls.model_fields.values()]
        assert aliases == [f["name"] for f in fields[name]], name


# --- bad bytes ---------------------------------------------------------------


def test_empty_value_is_malformed() -> None:
    with pytest.raises(MalformedRecordError) as info:
        CODEC.decode(b"")
    assert info.value.code == "malformed_record"


def test_json_is_not_an_avro_record() -> None:
    with pytest.raises(MalformedRecordError):
        CODEC.decode(b'{"serviceId": "svc"}')


def test_unknown_fingerprint_is_a_typed_error() -> None:
    with pytest.raises(UnknownSchemaError) as info:
        CODEC.decode(SOE_MARKER + b"\x01" * 8 + b"\x00")
    assert info.value.code == "unknown_schema"
    assert info.value.details["fingerprint"] == "01" * 8


def test_truncated_header_and_body_are_malformed() -> None:
    record = samples()[0]
    data = CODEC.encode(record.schema_name, record.to_avro())
    with pytest.raises(MalformedRecordError):
        CODEC.decode(data[:6])
    with pytest.raises(MalformedRecordError):
        CODEC.decode(data[:-5])


def test_trailing_bytes_are_malformed() -> None:
    record = samples()[6]
    with pytest.raises(MalformedRecordError, match="trailing"):
        CODEC.decode(CODEC.encode(record.schema_name, record.to_avro()) + b"\x00")


def test_a_record_of_another_schema_is_refused_when_one_is_expected() -> None:
    record = samples()[6]
    data = CODEC.encode(record.schema_name, record.to_avro())
    with pytest.raises(UnexpectedSchemaError) as info:
        CODEC.decode(data, expected=CommitResult.schema_name)
    assert info.value.code == "unexpected_schema"
    assert info.value.details == {
        "expected": CommitResult.schema_name,
        "actual": Certificate.schema_name,
    }


def test_confluent_framing_without_a_registry_is_unknown_schema() -> None:
    with pytest.raises(UnknownSchemaError, match="no schema registry"):
        CODEC.decode(b"\x00\x00\x00\x00\x07" + b"\x02")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([b"", SOE_MARKER]))
def test_arbitrary_bytes_either_decode_or_raise_a_codec_error(body: bytes, head: bytes) -> None:
    fingerprints = [CATALOG.get(n).fingerprint for n in CATALOG.names()]
    for data in (head + body, SOE_MARKER + fingerprints[len(body) % len(fingerprints)] + body):
        try:
            CODEC.decode(data)
        except CodecError as exc:
            assert exc.code in {"malformed_record", "unknown_schema"}


def test_invalid_records_are_refused_on_encode() -> None:
    good = samples()[7].to_avro()
    for bad in (
        {**good, "unknownField": 1},
        {**good, "suids": "not-a-list"},
        {k: v for k, v in good.items() if k != "attemptId"},
    ):
        with pytest.raises(InvalidRecordError) as info:
            CODEC.encode(CommitResult.schema_name, bad)
        assert info.value.code == "invalid_record"
    with pytest.raises(UnknownSchemaError):
        CODEC.encode("dcb.streams.Nope", good)


def test_unknown_fields_deep_inside_a_record_are_refused() -> None:
    command = samples()[0].to_avro()
    command["commit"]["events"][0]["bogus"] = "x"
    command["commit"]["condition"]["failIfEventsMatch"][0]["tagz"] = []
    with pytest.raises(InvalidRecordError) as info:
        CODEC.encode(samples()[0].schema_name, command)
    assert info.value.details["unknownFields"] == [
        "commit.events.0.bogus",
        "commit.condition.failIfEventsMatch.0.tagz",
    ]


# --- Confluent wire format against a registry stand-in (in-process HTTP) -----------


class _Registry(BaseHTTPRequestHandler):
    schemas: ClassVar[dict[int, str]] = {}

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for schema_id, text in self.schemas.items():
            if text == body["schema"]:
                return self._reply(200, {"id": schema_id})
        schema_id = 100 + len(self.schemas)
        self.schemas[schema_id] = body["schema"]
        return self._reply(200, {"id": schema_id})

    def do_GET(self) -> None:
        schema_id = int(self.path.rsplit("/", 1)[-1])
        if schema_id not in self.schemas:
            return self._reply(404, {"error_code": 40403, "message": "Schema not found"})
        return self._reply(200, {"schema": self.schemas[schema_id]})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def registry_url() -> Iterator[str]:
    _Registry.schemas = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_confluent_wire_format_round_trips_through_a_registry(registry_url: str) -> None:
    codec = AvroCodec(CATALOG, SchemaRegistryClient(registry_url))
    for record in samples():
        data = codec.encode(record.schema_name, record.to_avro())
        assert data[:1] == b"\x00"
        (schema_id,) = struct.unpack(">I", data[1:5])
        assert json.loads(_Registry.schemas[schema_id])["name"] == record.schema_name
        # a fresh reader knows nothing cached: it fetches the writer schema by id
        reader = AvroCodec(CATALOG, SchemaRegistryClient(registry_url))
        assert type(record).from_avro(reader.decode(data, record.schema_name).value) == record
        assert (
            CODEC.decode(CODEC.encode(record.schema_name, record.to_avro())).value
            == reader.decode(data).value
        )


def test_unknown_registry_id_is_a_registry_error(registry_url: str) -> None:
    codec = AvroCodec(CATALOG, SchemaRegistryClient(registry_url))
    with pytest.raises(SchemaRegistryError) as info:
        codec.decode(b"\x00\x00\x00\x03\xe7\x02")
    assert info.value.code == "schema_registry_error"
    assert info.value.details["status"] == 404


def test_unreachable_registry_is_a_registry_error() -> None:
    codec = AvroCodec(CATALOG, SchemaRegistryClient("http://127.0.0.1:1", timeout_s=1))
    record = samples()[6]
    with pytest.raises(SchemaRegistryError, match="unreachable"):
        codec.encode(record.schema_name, record.to_avro())


def _framed(schema_id: int, writer: dict[str, Any], value: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(writer, named_schemas={}), value)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


def test_a_registry_schema_is_parsed_once_and_an_evolved_writer_is_resolved(
    registry_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer schema from the registry that is not the catalog's (a field added with a
    default, by a newer producer) is read through the catalog's schema; either kind is
    parsed at its id's first record only."""
    record = samples()[6]
    entry = CATALOG.get(record.schema_name)
    evolved = json.loads(entry.schema_json)
    evolved["fields"].append({"name": "addedLater", "type": "string", "default": ""})
    _Registry.schemas = {7: json.dumps(evolved), 8: entry.schema_json}
    parsed: list[object] = []

    def parse_counted(schema: Any, **kwargs: Any) -> Any:
        parsed.append(schema)
        return parse_schema(schema, **kwargs)

    monkeypatch.setattr("streams.codec.avro_codec.parse_schema", parse_counted)
    reader = AvroCodec(CATALOG, SchemaRegistryClient(registry_url))
    newer = _framed(7, evolved, {**record.to_avro(), "addedLater": "x"})
    same = _framed(8, json.loads(entry.schema_json), record.to_avro())
    for _ in range(3):
        for data in (newer, same):
            decoded = reader.decode(data, record.schema_name)
            assert type(record).from_avro(decoded.value) == record
            assert "addedLater" not in decoded.value
    assert len(parsed) == 2
    # the catalog's own schema is read as written; the evolved one through the catalog's
    assert reader._registry_schemas(8)[2] is None
    assert reader._registry_schemas(7)[2] is entry.parsed
