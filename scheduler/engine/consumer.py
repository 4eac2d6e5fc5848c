"""Draining the activation and results queues in batches (kombu, acks after commit).

Celery's one-task-per-message model would cost a transaction per message; the engine
instead takes up to ``batch_size`` messages, applies them in one transaction and then
acknowledges them all. A message whose batch fails is requeued, never acknowledged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kombu import Connection, Consumer, Exchange, Queue
from kombu.message import Message

from common.messaging.messages import ACTIVATION_QUEUE, RESULTS_QUEUE
from scheduler.engine.batch import BatchApplier, BatchOutcome
from scheduler.engine.incoming import Incoming, decode

log = logging.getLogger(__name__)
# Short, so that a crashed engine's unacknowledged messages come back within a minute.
ENGINE_VISIBILITY_TIMEOUT_S = 60


def engine_queues() -> list[Queue]:
    """The queues the engine consumes, declared as Celery declares them."""
    return [Queue(name, Exchange(name, type="direct"), routing_key=name)
            for name in (ACTIVATION_QUEUE, RESULTS_QUEUE)]


class EngineConsumer:
    """Collects messages into batches and hands them to a :class:`BatchApplier`."""

    def __init__(
        self, redis_url: str, applier: BatchApplier, *, batch_size: int,
        batch_wait: timedelta, on_outcome: Callable[[BatchOutcome], None] | None = None,
    ) -> None:
        self._url = redis_url
        self._applier = applier
        self._batch_size = batch_size
        self._wait_s = batch_wait.total_seconds()
        self._on_outcome = on_outcome
        self._pending: list[tuple[Incoming | None, Message]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        """Consume until :attr:`stopping` is set."""
        transport = {"visibility_timeout": ENGINE_VISIBILITY_TIMEOUT_S}
        with Connection(self._url, transport_options=transport) as conn:
            consumer = Consumer(conn.default_channel, queues=engine_queues(),
                                callbacks=[self._collect], accept=["json"])
            consumer.qos(prefetch_count=self._batch_size)
            with consumer:
                while not self.stopping.is_set():
                    self._fill(conn)
                    if self._pending:
                        self._flush()

    def _collect(self, body: Any, message: Message) -> None:
        self._pending.append((decode(message.headers.get("task"), body), message))

    def _fill(self, conn: Connection) -> None:
        """Block up to a second for the first message, then take what comes quickly."""
        timeout = 1.0
        while len(self._pending) < self._batch_size:
            try:
                conn.drain_events(timeout=timeout)
            except TimeoutError:
                return
            timeout = self._wait_s

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        batch = [item for item, _ in pending if item is not None]
        try:
            outcome = self._applier.apply(batch)
        except Exception:
            log.exception("batch of %d messages failed; requeued", len(pending))
            for _, message in pending:
                message.requeue()
            self.stopping.wait(1.0)
            return
        for _, message in pending:
            message.ack()
        if self._on_outcome is not None:
            self._on_outcome(outcome)
