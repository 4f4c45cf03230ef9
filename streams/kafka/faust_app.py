"""The faust-streaming application factory and the transactional output path.

faust 0.15's ``exactly_once`` mode commits table changelogs and source offsets
in transactions, but ``Topic.send`` from an agent goes through a producer outside
them (faust-streaming/faust#177): an aborted step would leave its outputs visible.
:func:`send_in_transaction` writes through the transactional producer that commits
the source's offset (one per process here, ``faust_transport``), so outputs commit or
abort together with the offsets (proven by ``tests/integration/test_faust_agent.py``).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import faust
from faust.types import EventT, RecordMetadata

from streams.infra.ports import free_port
from streams.kafka.faust_transport import (
    COMMIT_MAX_INTERVAL,
    INSTANCE_ID,
    TRANSACTION_TIMEOUT_S,
    CommitPathTransport,
    commit_path_producer,
    process_transactional_id,
)
from streams.kafka.topic_catalog import TopicLayout
from streams.settings import SESSION_TIMEOUT_S, WorkerSettings


def make_app(
    app_id: str,
    bootstrap_servers: str,
    datadir: Path,
    *,
    web_port: int | None = None,
    commit_max_interval_s: float | None = None,
    instance_id: str | None = None,
    transaction_timeout_s: float = 5.0,
    **overrides: Any,
) -> faust.App:
    """A faust app in exactly-once mode, its web server on loopback only.

    A commit starts once the agents go quiet after a step, at the latest
    ``broker_commit_interval`` after the previous one ends, stretched up to
    ``commit_max_interval_s`` under load (:mod:`streams.kafka.commit_pacing`; ``None``:
    never stretched). All the process's steps commit in one transaction, whose id ends in
    ``instance_id`` (default: a fresh one): a process started with the id of one that
    died aborts what that one left open at once; otherwise the broker aborts it after
    ``transaction_timeout_s``, which must be shorter than the session timeout: a dead
    worker's transaction is then aborted before the group hands its partitions on, and
    the new owner's restore, which waits until no transaction is open on its changelogs
    (:mod:`streams.kafka.settled_ends`), does not wait for it.
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
        "broker_session_timeout": SESSION_TIMEOUT_S,
        "broker_heartbeat_interval": 1.0,
        **overrides,
    }
    if transaction_timeout_s >= settings["broker_session_timeout"]:
        raise ValueError(
            f"transaction timeout {transaction_timeout_s} s must be shorter than the "
            f"session timeout ({settings['broker_session_timeout']} s)"
        )
    app = faust.App(app_id, **settings)
    app.transport = CommitPathTransport(app.conf.broker_consumer, app)
    if commit_max_interval_s is not None:
        setattr(app, COMMIT_MAX_INTERVAL, commit_max_interval_s)
    setattr(app, INSTANCE_ID, instance_id or uuid.uuid4().hex)
    setattr(app, TRANSACTION_TIMEOUT_S, transaction_timeout_s)
    return app


def commit_options(worker: WorkerSettings) -> dict[str, Any]:
    """``make_app``'s arguments for how a worker commits, from its settings: every app of
    the commit path (the worker, the bench's transport floor) commits the same way."""
    return {
        "broker_commit_interval": worker.commit_interval_s,
        "commit_max_interval_s": worker.commit_max_interval_s,
        "transaction_timeout_s": worker.transaction_timeout_s,
    }


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


async def send_in_transaction(
    app: faust.App,
    source: EventT[Any],
    topic: str,
    key: bytes | None,
    value: bytes | None,
    *,
    partition: int | None = None,
) -> asyncio.Future[RecordMetadata]:
    """Send ``value`` to ``topic`` inside the transaction that commits ``source``'s offset.

    Returns the delivery future without waiting for it: the transaction's commit waits
    for every send of the transaction and fails if one failed (``faust_transport``).

    The record becomes visible to ``read_committed`` consumers only when faust
    commits ``source``'s offset; if the worker dies first, the transaction is aborted
    and the next owner of the partition reprocesses ``source``.
    """
    if not app.in_transaction:
        raise RuntimeError("send_in_transaction needs processing_guarantee='exactly_once'")
    tid = process_transactional_id(app)
    producer = commit_path_producer(app)
    sent = await producer.send(topic, key, value, partition, None, None, transactional_id=tid)
    # Right after the send, which held the transaction's lock: no commit has started since
    # (none may add partitions to a transaction that is ending).
    producer.add_table_partitions(tid, source.message.tp)
    return asyncio.ensure_future(sent)  # the commit waits for it; this step need not
