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

from collections.abc import Callable, Mapping, Sequence
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
    end_roles = (TopicRole.TAG_DELIVERIES,)

    def __init__(self, settings: DcbSettings, codec: AvroCodec) -> None:
        super().__init__(settings, codec)
        # partition -> table key -> the live table and how many of its events are stored
        self.live: dict[int, dict[str, tuple[TagTable, int]]] = {}
        # Per partition: the next delivery offset to step, the end the topic had at the
        # takeover, the offset of the last delivery record this process sent, and those
        # whose newest record is on its way, each with the round that sends it (rounds
        # overlap: an older round's record can land while a newer one's is still unsent).
        self._position: dict[int, int] = {}
        self._caught_up_at: dict[int, int] = {}
        self._sent: dict[int, int] = {}
        self._unsent: dict[int, object] = {}

    @property
    def partitions(self) -> int:
        return self.settings.topics.tag_partitions

    def assign(
        self, partition: int, rows: Rows, ends: Mapping[str, int], offsets: Mapping[str, int]
    ) -> None:
        super().assign(partition, rows, ends, offsets)
        self.live[partition] = {}
        deliveries = self.topic(TopicRole.TAG_DELIVERIES)
        self._position[partition] = max(offsets[deliveries], 0)
        self._caught_up_at[partition] = ends[deliveries]  # covers all sent before now
        self._sent.pop(partition, None)
        self._unsent.pop(partition, None)

    def revoke(self, partition: int) -> None:
        super().revoke(partition)
        self.live.pop(partition, None)
        for per_partition in (self._position, self._caught_up_at, self._sent):
            per_partition.pop(partition, None)
        self._unsent.pop(partition, None)

    def _table(self, partition: int, service_id: str, tag: str) -> TagTable:
        key = table_key(service_id, tag)
        live = self.live[partition]
        if key in live:
            return live[key][0]
        belongs = tag_partition(service_id, tag, self.settings.topics)
        if belongs != partition:
            raise TagProtocolError(
                f"a delivery for {tag!r} came to tag partition {partition}; the "
                f"placement puts it in {belongs}",
                tag=tag,
                partition=partition,
            )
        headers, installed = self.tables["tag-tables"], self.tables["tag-installed"]
        header = headers.get(partition, key)
        if header is None:
            state = TagTableState(service_id=service_id, tag=tag)
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
                if group[0].action == "TRIM":
                    try:
                        self._trim(partition, group[0], changed)
                    except DcbError as exc:
                        self.dead_letter(out, message, exc, group[0].service_id, indexes[0])
                    continue
                try:
                    resolved = self._decide(partition, group)
                except DcbError as exc:
                    for index in indexes:
                        self.dead_letter(out, message, exc, items[index].service_id, index)
                    continue
                changed.update(table_key(d.service_id, d.tag) for d in group)
                for answer in resolved:
                    to = ledger_partition(answer.service_id, self.settings.topics)
                    answers.setdefault(to, []).append(answer)
        if messages:
            self._position[partition] = (messages[-1].offset() or 0) + 1
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

    def _decide(self, partition: int, group: list[TagDelivery]) -> list[TagResolution]:
        """One step of a batch: a one-phase attempt's PREPAREs, or one two-phase item."""
        tables = [self._table(partition, d.service_id, d.tag) for d in group]
        if one_phase.is_one_phase(group[0]):
            return one_phase.decide_together(list(zip(tables, group, strict=True)))
        return [tables[0].handle(group[0])]

    def _trim(self, partition: int, trim: TagDelivery, changed: set[str]) -> None:
        """Every table of the service in this partition drops its installed events up to
        the trim's SUID (archived), their rows deleted; each table it changed joins
        ``changed`` at once (its header must be stored with the deletions, also when a
        later table fails)."""
        service_prefix = table_key(trim.service_id, "")
        stored = (key for key, _ in self.tables["tag-tables"].items(partition))
        keys = {k for k in (*self.live[partition], *stored) if k.startswith(service_prefix)}
        installed = self.tables["tag-installed"]
        for key in sorted(keys):
            table = self._table(partition, trim.service_id, key[len(service_prefix) :])
            changed.add(key)  # its header: what it dropped, its tombstones
            for index in table.trim(trim.suid):
                installed.delete(partition, store.installed_key(key, index))

    # --- one-phase attempts decided in the ledger's round ---------------------------------

    def can_decide_here(self, partition: int) -> bool:
        """Whether the ledger of this process may have this partition decide one-phase
        attempts at once, in its own round: the partition is this process's and every
        delivery record sent to it so far has been stepped (so the attempts are decided
        in the order they were sent, as through the topic)."""
        position = self._position.get(partition)
        if position is None or partition in self._unsent:
            return False
        return position >= self._caught_up_at[partition] and position > self._sent.get(
            partition, -1
        )

    def decide_here(self, partition: int, items: Sequence[TagDelivery]) -> list[TagResolution]:
        """The answers to one-phase PREPAREs decided now, as a step of the partition would
        (the tables it changed are stored in the same round)."""
        answers: list[TagResolution] = []
        changed: set[str] = set()
        for indexes in one_phase.steps(items):
            group = [items[i] for i in indexes]
            answers += self._decide(partition, group)
            changed.update(table_key(d.service_id, d.tag) for d in group)
        self._store(partition, changed)
        return answers

    def sending(self, partition: int) -> Callable[[int, int], None]:
        """A delivery record for ``partition`` goes out in this round: nothing is decided
        here until it has been stepped. The returned call hears where it landed (a record
        of an earlier round landing leaves this one unsent)."""
        self._unsent[partition] = sending = object()

        def landed(_partition: int, offset: int) -> None:
            if self._unsent.get(partition) is sending:
                del self._unsent[partition]
            self._sent[partition] = max(self._sent.get(partition, -1), offset)

        return landed

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
            live[key] = (table, store.installed_count(table.state))
