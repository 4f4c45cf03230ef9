"""The commit path's own code per event, without Kafka: what the agents' steps compute.

The worker's CPU per step (``commit.py``) is the transport's plus the steps' own work,
and a run on two shared cores varies by 10 to 15 per cent, so it cannot tell a change of
the steps' code from noise. Here the same steps run in one loop, in process: each record
decoded from its Avro bytes, the ledger's or tag table's core run on it, its table rows
made (``ledger/store.py``, ``tags/store.py``), its outputs encoded, and every delivery
fed to its tag at once. What is left of the worker's CPU per event is faust, aiokafka
and the broker round trips: the transport.

It also counts the records each step writes — outputs and table rows, each a record on
its topic or changelog, as in the agents — and, of those, the ones a worker certainly
sends: a commit round sends a table key's last write only, so a header or an attempt's
row rewritten by several steps of one round may go once. The floor's cost per record
(``floor.py``) prices the certain ones in the ceiling (``commit.py``), an upper bound.
"""

from __future__ import annotations

import time
from collections import deque
from datetime import UTC, datetime

from pydantic import BaseModel

from streams.bench.floor import steps_per_event
from streams.codec import AvroCodec
from streams.ledger import store as ledger_store
from streams.ledger.ledger import IssuanceLedger
from streams.ledger.state import LedgerState
from streams.model import table_rows
from streams.model.records import AvroRecord, Command, TagDelivery, TagResolution
from streams.tags import store as tag_store
from streams.tags.table import TagTable, TagTableState

GRACE_MS = 60_000  # nothing is reconciled in a run


class CoreCost(BaseModel):
    tags: int
    events: int
    us_per_event: float
    us_per_step: float
    records_per_step: float  # outputs and table rows (changelog records) a step writes
    # Of those, the ones no other write of the same round can replace: outputs, rows of
    # keys written once per event (a new attempt's row, its removal, a completed attempt,
    # an installed event). Headers and rewritten attempt rows are left out.
    certain_records_per_step: float


class CommitPathCore:
    """One service's ledger and its tag tables, stepped as the agents step them."""

    def __init__(self, codec: AvroCodec) -> None:
        self.codec = codec
        self.ledger = IssuanceLedger(
            LedgerState(service_id="bench", allocator_lineage_id="bench"), GRACE_MS
        )
        self.tables: dict[str, TagTable] = {}
        self.steps = 0
        self.records = 0  # written by the steps: outputs and table rows
        self.certain_records = 0  # of those, never replaced by a later write of a round

    def _encode(self, record: AvroRecord) -> bytes:
        return self.codec.encode(record.schema_name, record.to_avro(), check=False)

    def _decode(self, value: bytes, cls: type[AvroRecord]) -> AvroRecord:
        return cls.from_avro(self.codec.decode(value, cls.schema_name).value)

    def ledger_step(self, value: bytes, cls: type[Command] | type[TagResolution]) -> list[bytes]:
        """One ledger step; the deliveries it sends, encoded."""
        self.steps += 1
        record = self._decode(value, cls)
        ledger, now = self.ledger, datetime.now(UTC)
        before = set(ledger.state.attempts)
        if isinstance(record, Command):
            assert record.commit is not None
            step = ledger.register(record.commit, now, None)
        else:
            assert isinstance(record, TagResolution)
            step = ledger.apply_resolution(record, now)
        writes = ledger_store.writes_for(ledger.state, ledger_store.touched_by(record), before)
        for done in step.completed:
            table_rows.dump(done)
        outputs = (*step.allocations, *step.events, *step.results)
        for record_out in outputs:
            self._encode(record_out)
        sent = len(outputs) + len(step.deliveries)
        once = len(set(ledger.state.attempts) - before) + len(writes.removed) + len(step.completed)
        self.records += 1 + len(writes.attempts) + len(writes.removed) + len(step.completed) + sent
        self.certain_records += once + sent
        return [self._encode(delivery) for delivery in step.deliveries]

    def tag_step(self, value: bytes) -> bytes:
        """One tag step; its answer, encoded."""
        self.steps += 1
        delivery = self._decode(value, TagDelivery)
        assert isinstance(delivery, TagDelivery)
        table = self.tables.get(delivery.tag)
        if table is None:
            table = TagTable(TagTableState(service_id=delivery.service_id, tag=delivery.tag))
            self.tables[delivery.tag] = table
        before = len(table.state.installed)
        answer = table.handle(delivery, datetime.now(UTC))
        writes = tag_store.writes_for(table.state, delivery.tag, before)
        self.records += 1 + len(writes.installed) + 1  # header, new rows, the answer
        self.certain_records += len(writes.installed) + 1
        return self._encode(answer)

    def commit(self, command: bytes) -> None:
        """Every step of one command, its deliveries answered as they come."""
        deliveries = deque(self.ledger_step(command, Command))
        while deliveries:
            answer = self.tag_step(deliveries.popleft())
            deliveries.extend(self.ledger_step(answer, TagResolution))


def run_core(codec: AvroCodec, tags: int, encoded: list[bytes]) -> CoreCost:
    """CPU per event and per step of the commit path's own code over ``encoded`` COMMIT
    commands (one service, one event of ``tags`` tags each, no condition)."""
    events = len(encoded)
    core = CommitPathCore(codec)
    started = time.process_time()
    for command in encoded:
        core.commit(command)
    spent = time.process_time() - started
    if core.steps != events * steps_per_event(tags):
        raise RuntimeError(f"{core.steps} steps for {events} events of {tags} tag(s)")
    return CoreCost(
        tags=tags,
        events=events,
        us_per_event=round(spent * 1e6 / events, 1),
        us_per_step=round(spent * 1e6 / core.steps, 1),
        records_per_step=round(core.records / core.steps, 2),
        certain_records_per_step=round(core.certain_records / core.steps, 3),
    )
