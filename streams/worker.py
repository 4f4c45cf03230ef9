"""``dcb worker``: the ledger and tag processors in one runtime (:mod:`streams.kafka.runtime`).

Several worker processes with the same app id form one consumer group and share the
partitions; tables live in changelog topics, so a partition's state moves with it.
"""

from __future__ import annotations

import gc
import logging
import signal
from types import FrameType

from streams.codec import AvroCodec, codec_from_settings
from streams.errors import NotAuthorizedError, TopicLayoutMismatchError
from streams.infra.supervisor import EXIT_USAGE
from streams.kafka import clients
from streams.kafka.processor import Processor
from streams.kafka.runtime import Runtime
from streams.kafka.store_layout import ensure_layout
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicLayout, changelog_layout
from streams.ledger.processor import LedgerProcessor
from streams.settings import DcbSettings
from streams.tags.processor import TagProcessor

log = logging.getLogger("streams.worker")


def build_processors(settings: DcbSettings, codec: AvroCodec) -> list[Processor]:
    tags = TagProcessor(settings, codec)
    return [LedgerProcessor(settings, codec, tags), tags]


def changelog_layouts(processors: list[Processor], settings: DcbSettings) -> list[TopicLayout]:
    """The processors' changelog topics, created before the first restore reads them."""
    factor = settings.topics.replication_factor
    return [changelog_layout(p.changelog, p.partitions, factor) for p in processors]


def run_worker(settings: DcbSettings, loglevel: str = "info") -> None:
    logging.basicConfig(
        level=loglevel.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    bootstrap = settings.kafka
    codec = codec_from_settings(settings)
    processors = build_processors(settings, codec)
    try:
        ensure_layout(bootstrap, settings.topics, codec)
        ensure_topics(clients.admin(bootstrap), changelog_layouts(processors, settings))
    except (TopicLayoutMismatchError, NotAuthorizedError) as exc:
        # Another layout, or topics the broker does not let this login touch (another
        # tenant's): starting again would fail again, so exit 2.
        log.error("%s: %s", exc.code, exc.message)
        raise SystemExit(EXIT_USAGE) from exc
    runtime = Runtime(settings, processors, codec)

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping after this round", signum)
        runtime.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # What is built by now (modules, classes, the runtime) lives as long as the process; out
    # of the collector's sight, a full collection walks only what the tables grew since.
    gc.collect()
    gc.freeze()
    runtime.run()
    log.info("worker stopped after %d rounds", runtime.rounds)
