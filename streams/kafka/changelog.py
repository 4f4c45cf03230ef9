"""The processors' tables: rows in memory, kept in compacted changelog topics.

A table is partitioned like its processor's sources, so a partition's state moves with
the partition. A step's writes reach the changelog in the round's transaction
(:mod:`streams.kafka.checkpoint`), the last write per key only. When a process takes a
partition over, it restores the table from the changelog (:func:`restore`).

**Where a restore stops.** A ``read_committed`` reader stops at a partition's last
stable offset (LSO): the first record of the earliest transaction still open there. A
committed write can lie beyond it, for two reasons: a transaction's commit markers land
one partition at a time (the new owner may see the offsets of a transaction committed
while a changelog partition still has it open, for milliseconds), and a dead worker's
transaction stays open until the broker times it out. So a restore takes each
partition's end only once its LSO equals its high watermark, and reads to there. Nobody
else writes an assigned changelog partition, so what opens after that is a departed
owner's transaction, which can never commit: its offsets carry a stale group generation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from streams.errors import KafkaUnavailableError, WorkerStalledError
from streams.kafka import clients
from streams.kafka.connection import Brokers
from streams.kafka.end_offsets import EndOffsets

log = logging.getLogger("streams.worker")

Rows = dict[str, bytes]
SETTLE_POLL_S = 0.05


class Table:
    """One changelog-backed table: its rows by partition, and the writes of the open round.

    A processor's tables share one changelog topic (``topic``): every partition a round
    writes costs its transaction a commit marker, so fewer topics cost the broker less. A
    row's key on the topic is the table's name, ``:``, its key. A round's writes are held
    until :meth:`take_writes` (the checkpoint sends the last one per key); rows a live
    object already holds may be :meth:`forget`-ed from memory.
    """

    def __init__(self, topic: str, name: str) -> None:
        self.name = name
        self.topic = topic
        self._prefix = f"{name}:"
        self._rows: dict[int, Rows] = {}
        self._writes: dict[tuple[int, str], bytes | None] = {}

    def load(self, partition: int, rows: Rows) -> None:
        """Keep this table's rows of a changelog partition's (those under its name)."""
        cut = len(self._prefix)
        self._rows[partition] = {
            key[cut:]: row for key, row in rows.items() if key.startswith(self._prefix)
        }

    def drop(self, partition: int) -> None:
        self._rows.pop(partition, None)
        for key in [k for k in self._writes if k[0] == partition]:
            del self._writes[key]

    def get(self, partition: int, key: str) -> bytes | None:
        return self._rows[partition].get(key)

    def items(self, partition: int) -> list[tuple[str, bytes]]:
        return list(self._rows[partition].items())

    def put(self, partition: int, key: str, row: bytes, keep: bool = True) -> None:
        """Write ``row`` in this round; ``keep=False`` when a live object holds it (it is
        then only in the changelog, not in this table's memory)."""
        if keep:
            self._rows[partition][key] = row
        self._writes[partition, key] = row

    def delete(self, partition: int, key: str) -> None:
        self._rows[partition].pop(key, None)
        self._writes[partition, key] = None  # a tombstone: compaction drops the key

    def forget(self, partition: int, key: str) -> None:
        """Free a row's memory without writing anything (a live object holds the state)."""
        self._rows[partition].pop(key, None)

    @property
    def has_writes(self) -> bool:
        return bool(self._writes)

    def take_writes(self) -> dict[tuple[int, str], bytes | None]:
        """The round's writes, by partition and key on the changelog topic."""
        writes, self._writes = self._writes, {}
        return {(partition, self._prefix + key): row for (partition, key), row in writes.items()}


def changelog_topic(app_id: str, processor: str) -> str:
    return f"{app_id}-{processor}-changelog"


def settled_ends(
    offsets: EndOffsets, partitions: Iterable[tuple[str, int]], deadline: float
) -> dict[tuple[str, int], int]:
    """Each partition's end once no transaction is open on it (LSO == high watermark)."""
    pending = list(partitions)
    ends: dict[tuple[str, int], int] = {}
    while pending:
        try:
            committed = offsets.latest(pending, committed=True, timeout_s=_left(deadline))
            written = offsets.latest(pending, committed=False, timeout_s=_left(deadline))
        except KafkaUnavailableError as exc:
            raise WorkerStalledError(f"no end offsets for the changelogs: {exc}") from exc
        still = [tp for tp in pending if committed[tp] != written[tp]]
        ends.update((tp, written[tp]) for tp in pending if committed[tp] == written[tp])
        if still and time.monotonic() > deadline:
            raise WorkerStalledError(
                f"a transaction stayed open on {len(still)} changelog partition(s) "
                "past the restore's deadline",
                partitions=[f"{topic}[{partition}]" for topic, partition in still],
            )
        pending = still
        if pending:
            time.sleep(SETTLE_POLL_S)
    return ends


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)


def restore(
    brokers: Brokers,
    group: str,
    partitions: list[tuple[str, int]],
    stall_timeout_s: float,
    progress: Callable[[], None] = lambda: None,
) -> dict[tuple[str, int], Rows]:
    """The rows of each changelog partition: every committed write up to its settled end,
    the last per key (a tombstone removes the key). A restore may take long; it fails when
    it makes no progress for ``stall_timeout_s``, and calls ``progress`` when it does."""
    deadline = time.monotonic() + stall_timeout_s
    rows: dict[tuple[str, int], Rows] = {tp: {} for tp in partitions}
    if not partitions:
        return rows
    ends = settled_ends(EndOffsets(brokers), partitions, deadline)
    todo = {tp for tp, end in ends.items() if end > 0}
    if not todo:
        return rows
    consumer = clients.consumer(brokers, group, **{"enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in todo])
        while todo:
            if time.monotonic() > deadline:
                raise WorkerStalledError(
                    f"restoring {len(todo)} changelog partition(s): nothing read for "
                    f"{stall_timeout_s} s"
                )
            messages = consumer.consume(10_000, 0.5)
            if messages:
                deadline = time.monotonic() + stall_timeout_s
                progress()
            for message in messages:
                tp = (message.topic() or "", message.partition() or 0)
                offset = message.offset() or 0
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("restoring %s[%d]: %s", tp[0], tp[1], error)
                        continue
                    if offset >= ends[tp]:
                        todo.discard(tp)
                    continue
                if offset >= ends[tp]:
                    continue  # written after the restore began: nobody's but a zombie's
                key = (message.key() or b"").decode()
                value = message.value()
                table = rows[tp]
                if value is None:
                    table.pop(key, None)
                else:
                    table[key] = value
                if offset + 1 >= ends[tp]:
                    todo.discard(tp)
    finally:
        consumer.close()
    return rows
