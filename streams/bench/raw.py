"""The baseline: raw confluent-kafka transactional produce -> read_committed consume.

Writers hand their record to one transactional producer that commits whatever has
queued, one transaction after another (a stream processor's group commit without the
processing), and wait until a ``read_committed`` consumer sees it. The same bytes the
commit path carries (an encoded COMMIT command) travel, so the ratio measures what the
DCB protocol adds over Kafka's own exactly-once round trip.
"""

from __future__ import annotations

import queue
import threading
import uuid
from concurrent.futures import Future

from confluent_kafka import Message

from streams.kafka import clients
from streams.kafka.connection import Brokers
from streams.sdk.tail import TopicTail


class TransactionalRoundTrip:
    """``send(value)`` returns once ``value`` was committed and consumed back."""

    def __init__(self, brokers: Brokers, topic: str, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self._producer = clients.transactional_producer(brokers, f"{topic}-{uuid.uuid4().hex[:8]}")
        self._queue: queue.Queue[tuple[bytes, bytes]] = queue.Queue()
        self._waiting: dict[bytes, Future[None]] = {}
        self._lock = threading.Lock()
        self._tail = TopicTail(brokers, topic, from_end=True)
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._commit_loop, name="raw-commit", daemon=True),
            threading.Thread(target=self._consume_loop, name="raw-consume", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def send(self, value: bytes) -> None:
        key = uuid.uuid4().bytes
        future: Future[None] = Future()
        with self._lock:
            self._waiting[key] = future
        self._queue.put((key, value))
        try:
            future.result(self.timeout_s)
        finally:
            with self._lock:
                self._waiting.pop(key, None)

    def _commit_loop(self) -> None:
        while not self._closed.is_set():
            try:
                batch = [self._queue.get(timeout=0.1)]
            except queue.Empty:
                continue
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._producer.begin_transaction()
            for key, value in batch:
                self._producer.produce(self.topic, key=key, value=value)
            self._producer.commit_transaction(self.timeout_s)

    def _consume_loop(self) -> None:
        def arrived(message: Message) -> None:
            with self._lock:
                future = self._waiting.get(message.key() or b"")
            if future is not None and not future.done():
                future.set_result(None)

        while not self._closed.is_set():
            self._tail.poll(arrived, 0.1)

    def close(self) -> None:
        self._closed.set()
        for thread in self._threads:
            thread.join(5)
        self._tail.close()
