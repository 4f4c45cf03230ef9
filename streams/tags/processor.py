"""The tag processor: the thin shell around :class:`TagTable` and the one-phase rule.

Reads ``dcb.tag-deliveries``: a record is a batch of one ledger step's items for this tag
partition. A step handles every item of every record in order (a one-phase attempt's
PREPAREs together: :mod:`streams.tags.one_phase`), so a later item sees what an earlier
one reserved or installed; then it stores each table it changed once (its header and
the events it installed: :mod:`streams.tags.store`) and sends one resolution record per
ledger partition it answers, the answers in the order of their deliveries.

Tables: ``tag-tables`` (a header per service's tag), ``tag-installed`` (a row per
installed event). A table's rows are read once, when it is first needed after a restore;
from then on its live object holds it, and its rows are only in the changelog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from confluent_kafka import Message

from streams.codec import AvroCodec
from streams.errors import DcbError, TagProtocolError
from streams.kafka.changelog import Rows
from streams.kafka.checkpoint import Round
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole, ledger_partition, table_key, tag_partition
from streams.model.records import TagDelivery, TagDeliveryBatch, TagResolution, TagResolutionBatch
from streams.settings import DcbSettings
from streams.tags import one_phase, store
from streams.tags.table import TagTable, TagTableState


class TagProcessor(Processor):
    name = "tags"
    roles = (TopicRole.TAG_DELIVERIES,)
    table_names = ("tag-tables", "tag-installed")

    def __init__(self, settings: DcbSettings, codec: AvroCodec) -> None:
        super().__init__(settings, codec)
        # partition -> table key -> the live table and how many of its events are stored
        self.live: dict[int, dict[str, tuple[TagTable, int]]] = {}

    @property
    def partitions(self) -> int:
        return self.settings.topics.tag_partitions

    def assign(self, partition: int, rows: Rows, ends: Mapping[str, int]) -> None:
        super().assign(partition, rows, ends)
        self.live[partition] = {}

    def revoke(self, partition: int) -> None:
        super().revoke(partition)
        self.live.pop(partition, None)

    def _table(self, partition: int, delivery: TagDelivery) -> TagTable:
        key = table_key(delivery.service_id, delivery.tag)
        live = self.live[partition]
        if key in live:
            return live[key][0]
        belongs = tag_partition(delivery.service_id, delivery.tag, self.settings.topics)
        if belongs != partition:
            raise TagProtocolError(
                f"a delivery for {delivery.tag!r} came to tag partition {partition}; the "
                f"placement puts it in {belongs}",
                tag=delivery.tag,
                partition=partition,
            )
        headers, installed = self.tables["tag-tables"], self.tables["tag-installed"]
        header = headers.get(partition, key)
        if header is None:
            state = TagTableState(service_id=delivery.service_id, tag=delivery.tag)
            live[key] = (TagTable(state), 0)
            return live[key][0]
        state = store.restore(key, header, lambda row: installed.get(partition, row))
        stored = store.rows_stored(header)
        headers.forget(partition, key)
        for index in range(stored):
            installed.forget(partition, store.installed_key(key, index))
        live[key] = (TagTable(state), stored)
        return live[key][0]

    def step(self, partition: int, messages: Sequence[Message], out: Round) -> None:
        answers: dict[int, list[TagResolution]] = {}  # ledger partition -> in order
        changed: set[str] = set()
        for message, record in self.records(messages, out):
            assert isinstance(record, TagDeliveryBatch)
            items = record.items
            for indexes in one_phase.steps(items):
                group = [items[i] for i in indexes]
                try:
                    tables = [self._table(partition, d) for d in group]
                    if one_phase.is_one_phase(group[0]):
                        resolved = one_phase.decide_together(list(zip(tables, group, strict=True)))
                    else:
                        resolved = [tables[0].handle(group[0])]
                except DcbError as exc:
                    for index in indexes:
                        self.dead_letter(out, message, exc, items[index].service_id, index)
                    continue
                changed.update(table_key(d.service_id, d.tag) for d in group)
                for answer in resolved:
                    to = ledger_partition(answer.service_id, self.settings.topics)
                    answers.setdefault(to, []).append(answer)
        self._store(partition, changed)
        now = datetime.now(UTC)
        resolutions = self.topic(TopicRole.TAG_RESOLUTIONS)
        for to, answered in sorted(answers.items()):
            out.send_batch(
                resolutions,
                to,
                lambda chunk: TagResolutionBatch(
                    source_partition=partition, observed_at=now, items=chunk
                ),
                [[answer] for answer in answered],
            )

    def tick(self, now_ms: int, out: Round) -> None:
        """Nothing: a tag only answers what the ledger sends."""

    def carry(self, out: Round) -> None:
        """Nothing: a tag step leaves nothing for later."""

    def due(self) -> bool:
        return False

    def _store(self, partition: int, changed: set[str]) -> None:
        headers, installed = self.tables["tag-tables"], self.tables["tag-installed"]
        live = self.live[partition]
        for key in sorted(changed):
            table, stored = live[key]
            writes = store.writes_for(table.state, key, stored)
            for row_key, row in writes.installed.items():
                installed.put(partition, row_key, row, keep=False)
            headers.put(partition, key, writes.header, keep=False)
            live[key] = (table, len(table.state.installed))
