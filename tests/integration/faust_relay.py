"""A faust worker for the integration tests: decode every record, re-encode it, relay it.

Run as ``python -m tests.integration.faust_relay worker``. Configured by env:
``RELAY_BOOTSTRAP``, ``RELAY_PREFIX``, ``RELAY_DATADIR``, and ``RELAY_CRASH_AFTER=N``
to SIGKILL itself right after the N-th output is on the broker but before faust
commits its transaction (the fault-injection point of the exactly-once test).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from streams.codec import AvroCodec, SchemaCatalog
from streams.errors import CodecError
from streams.kafka.faust_app import make_app, send_in_transaction
from streams.model.records import record_types

PREFIX = os.environ.get("RELAY_PREFIX", "relay.")
IN_TOPIC = f"{PREFIX}relay-in"
OUT_TOPIC = f"{PREFIX}relay-out"
CRASH_AFTER = int(os.environ.get("RELAY_CRASH_AFTER", "0"))

app = make_app(
    f"{PREFIX}relay",
    os.environ.get("RELAY_BOOTSTRAP", "127.0.0.1:9092"),
    Path(os.environ.get("RELAY_DATADIR", "/tmp/dcb-relay")),
)
codec = AvroCodec(SchemaCatalog())
source = app.topic(
    IN_TOPIC, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
_TYPES = record_types()
_relayed = 0


@app.agent(source)
async def relay(stream):  # type: ignore[no-untyped-def]
    global _relayed
    async for event in stream.events():
        try:
            decoded = codec.decode(event.value)
        except CodecError as exc:
            print(f"relay: undecodable record at offset {event.message.offset}: {exc.code}")
            continue
        model = _TYPES[decoded.schema_name].from_avro(decoded.value)
        value = codec.encode(model.schema_name, model.to_avro())
        sent = await send_in_transaction(app, event, OUT_TOPIC, event.key, value)
        _relayed += 1
        print(f"relay: relayed offset {event.message.partition}@{event.message.offset}", flush=True)
        if CRASH_AFTER and _relayed >= CRASH_AFTER:
            await sent  # the outputs are on the broker, in the transaction the kill leaves open
            print("relay: crashing before commit (SIGKILL)", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    app.main()
