"""``dcb worker``: one faust app running the ledger agent, the tag agent and the reconciler.

Several worker processes with the same app id form one consumer group and share the
partitions; tables live in changelog topics, so a partition's state moves with it.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from typing import Any

import faust

from streams.codec import codec_from_settings
from streams.infra.supervisor import EXIT_RESTART
from streams.kafka import clients
from streams.kafka.faust_app import changelog_layouts, commit_options, make_app
from streams.kafka.faust_transport import DeliveryCheckedProducer
from streams.kafka.processor import Processor
from streams.kafka.topic_admin import ensure_topics
from streams.ledger import agent as ledger_agent
from streams.reconcile import timer
from streams.settings import DcbSettings
from streams.tags import agent as tag_agent

log = logging.getLogger("streams.worker")


def build_worker(settings: DcbSettings) -> faust.App:
    worker = settings.worker
    data_dir = worker.data_dir or settings.broker.cache_dir / "workers" / worker.app_id
    app = make_app(
        worker.app_id,
        settings.resolved_bootstrap_servers,
        data_dir,
        topic_allow_declare=True,  # the tables' changelog topics
        topic_partitions=settings.topics.partitions,
        instance_id=worker.instance_id,
        table_standby_replicas=0,
        **commit_options(worker),
    )
    proc = Processor(app, settings, codec_from_settings(settings))
    ledgers = ledger_agent.register(proc)
    tag_agent.register(proc)
    timer.register(proc, ledgers)
    return app


def start_watchdog(app: faust.App, interval_s: float = 0.5) -> threading.Thread:
    """Exit for a restart (``infra/supervisor.py``) once the app cannot go on.

    That is a crashed consumer, producer or app (a commit whose sends failed), a dead
    transactional producer, or an open transaction that lost a write. A thread, not a
    faust timer: a crashed app stops its timers and can hang in its own shutdown,
    retrying a broker that is gone.
    """

    def reason() -> str | None:
        # The private slots, not the properties: those would create services here.
        services: dict[str, Any] = {
            "app": app,
            "consumer": app._consumer,
            "producer": app._producer,
        }
        for name, service in services.items():
            if service is not None and service._crashed.is_set():
                return f"the {name} crashed: {service.crash_reason!r}"
        producer = services["producer"]
        if isinstance(producer, DeliveryCheckedProducer) and (dead := producer.dead_transactions()):
            return f"transaction(s) {', '.join(dead)} cannot go on (fatal producer or lost write)"
        return None

    def watch() -> None:
        while (why := reason()) is None:
            time.sleep(interval_s)
        log.error("%s; exiting so that a fresh process aborts the open transactions", why)
        logging.shutdown()
        os._exit(EXIT_RESTART)

    thread = threading.Thread(target=watch, name="dcb-watchdog", daemon=True)
    thread.start()
    return thread


def run_worker(settings: DcbSettings, loglevel: str = "info") -> None:
    app = build_worker(settings)
    admin = clients.admin(settings.resolved_bootstrap_servers)
    ensure_topics(admin, changelog_layouts(app, settings.topics.replication_factor))
    start_watchdog(app)
    # What is built by now (modules, classes, the app) lives as long as the process; out
    # of the collector's sight, a full collection walks only what the tables grew since.
    gc.collect()
    gc.freeze()
    faust.Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
