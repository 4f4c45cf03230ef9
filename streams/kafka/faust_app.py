"""The faust-streaming application factory and the transactional output path.

faust 0.15's ``exactly_once`` mode commits table changelogs and source offsets
in one transaction per source partition, but ``Topic.send`` from an agent goes
through a producer outside that transaction (faust-streaming/faust#177): an
aborted step would leave its outputs visible. :func:`send_in_transaction`
writes through the transactional producer that owns the source partition, so
outputs commit or abort together with the offsets (proven by
``tests/integration/test_faust_exactly_once.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import faust
from faust.types import EventT, RecordMetadata

from streams.infra.ports import free_port
from streams.kafka.faust_transport import (
    COMMIT_MAX_INTERVAL,
    CommitPathTransport,
    commit_path_producer,
)
from streams.kafka.topic_catalog import TopicLayout


def make_app(
    app_id: str,
    bootstrap_servers: str,
    datadir: Path,
    *,
    web_port: int | None = None,
    commit_max_interval_s: float | None = None,
    **overrides: Any,
) -> faust.App:
    """A faust app in exactly-once mode, its web server on loopback only.

    A commit starts once the agents go quiet after a step, at the latest
    ``broker_commit_interval`` after the previous one ends, stretched up to
    ``commit_max_interval_s`` under load (:mod:`streams.kafka.commit_pacing`; ``None``:
    never stretched).
    """
    datadir.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "broker": f"kafka://{bootstrap_servers}",
        "processing_guarantee": "exactly_once",
        "datadir": str(datadir),
        "web_bind": "127.0.0.1",
        "web_host": "127.0.0.1",
        "web_port": web_port or free_port(),
        "topic_allow_declare": False,
        "topic_disable_leader": True,
        "consumer_auto_offset_reset": "earliest",
        "store": "memory://",
        # A killed worker's partitions move after 10 s, not faust's default 60 s.
        "broker_session_timeout": 10.0,
        "broker_heartbeat_interval": 1.0,
        **overrides,
    }
    app = faust.App(app_id, **settings)
    app.transport = CommitPathTransport(app.conf.broker_consumer, app)
    if commit_max_interval_s is not None:
        setattr(app, COMMIT_MAX_INTERVAL, commit_max_interval_s)
    return app


def changelog_layouts(app: faust.App, replication_factor: int) -> list[TopicLayout]:
    """The tables' changelog topics, to create before the app starts.

    faust creates them itself moments before it subscribes; a topic the consumer's
    metadata did not show yet was left out of the assignment ("Ignoring missing topic"),
    and the first write to its table failed the step (``PartitionsMismatch``: seen in a
    bench run, which then stalled).
    """
    return [
        TopicLayout(
            table.changelog_topic.get_topic_name(),
            table.changelog_topic.partitions,
            replication_factor,
            "compact",
        )
        for table in app.tables.values()
    ]


def source_transactional_id(app: faust.App, topic: str, partition: int) -> str:
    """The transactional id faust uses for a source partition (its offsets' transaction)."""
    group = app.assignor.group_for_topic(topic)
    return f"{app.conf.id}-{group}-{partition}"


async def send_in_transaction(
    app: faust.App,
    source: EventT[Any],
    topic: str,
    key: bytes | None,
    value: bytes | None,
    *,
    partition: int | None = None,
) -> asyncio.Future[RecordMetadata]:
    """Send ``value`` to ``topic`` inside the transaction of ``source``'s partition.

    Returns the delivery future without waiting for it: the transaction's commit waits
    for every send of the transaction and fails if one failed (``faust_transport``).

    The record becomes visible to ``read_committed`` consumers only when faust
    commits that partition's offsets; if the worker dies first, the next owner
    of the partition aborts it and reprocesses ``source``.
    """
    if not app.in_transaction:
        raise RuntimeError("send_in_transaction needs processing_guarantee='exactly_once'")
    tp = source.message.tp
    tid = source_transactional_id(app, tp.topic, tp.partition)
    producer = commit_path_producer(app)
    sent = await producer.send(topic, key, value, partition, None, None, transactional_id=tid)
    return asyncio.ensure_future(sent)  # the commit waits for it; this step need not
