"""The reconciler timer: asks each ledger with recovery due to run a reconcile pass.

The pass itself runs in the ledger agent (a RECONCILE command on ``dcb.commands``), so
it is one more transactional ledger step; the timer only reads the ledger table and
sends the trigger, which is harmless to repeat.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from streams.kafka import clients
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole
from streams.ledger import store
from streams.model.records import Command, ReconcileRequest


def reconcile_command(service_id: str, skip_grace: bool, requested_by: str) -> Command:
    return Command(
        service_id=service_id,
        command_id=str(uuid.uuid4()),
        issued_at=datetime.now(UTC),
        kind="RECONCILE",
        reconcile=ReconcileRequest(skip_grace=skip_grace, requested_by=requested_by),
    )


def register(proc: Processor, ledgers: Any) -> None:
    producer = clients.producer(proc.settings.resolved_bootstrap_servers)
    topic = proc.topic(TopicRole.COMMANDS)

    @proc.app.timer(proc.settings.worker.reconcile_interval_s)  # type: ignore[untyped-decorator]
    async def reconcile_timer() -> None:
        now_ms = int(time.time() * 1000)
        for service_id, header in list(ledgers.items()):
            due = store.recovery_due_ms(header) if header else None
            if due is not None and due <= now_ms:
                command = reconcile_command(service_id, False, "timer")
                value = proc.codec.encode(command.schema_name, command.to_avro())
                producer.produce(topic, key=service_id.encode(), value=value)
        producer.poll(0)
