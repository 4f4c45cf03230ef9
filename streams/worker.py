"""``dcb worker``: one faust app running the ledger agent, the tag agent and the reconciler.

Several worker processes with the same app id form one consumer group and share the
partitions; tables live in changelog topics, so a partition's state moves with it.
"""

from __future__ import annotations

import logging
import os

import faust

from streams.codec import codec_from_settings
from streams.infra.supervisor import EXIT_RESTART
from streams.kafka.faust_app import make_app
from streams.kafka.faust_transport import DeliveryCheckedProducer
from streams.kafka.processor import Processor
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
        broker_commit_interval=worker.commit_interval_s,
        table_standby_replicas=0,
    )
    proc = Processor(app, settings, codec_from_settings(settings))
    ledgers = ledger_agent.register(proc)
    tag_agent.register(proc)
    timer.register(proc, ledgers)
    register_watchdog(app)
    return app


def register_watchdog(app: faust.App) -> None:
    """Exit for a restart once a transactional producer is dead (``infra/supervisor.py``)."""

    @app.timer(0.5)  # type: ignore[untyped-decorator]
    async def transactional_producers_alive() -> None:
        producer = app.producer
        dead = producer.dead_transactions() if isinstance(producer, DeliveryCheckedProducer) else []
        if dead:
            log.error(
                "transactional producer(s) %s failed fatally; exiting so that a fresh "
                "process aborts their open transactions and resumes",
                ", ".join(dead),
            )
            logging.shutdown()
            os._exit(EXIT_RESTART)


def run_worker(settings: DcbSettings, loglevel: str = "info") -> None:
    app = build_worker(settings)
    faust.Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
