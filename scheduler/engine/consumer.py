"""Draining the activation and results queues in batches, acknowledged after commit.

Celery's one-task-per-message model would cost a transaction (and kombu's bookkeeping)
per message; the engine instead takes up to ``batch_size`` messages in one Redis call,
applies them in one transaction, and only then acknowledges them all. A batch that
fails is put back at the head of its queues.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from common.messaging.messages import ACTIVATION_QUEUE, RESULTS_QUEUE
from common.messaging.reliable import BatchReader
from common.messaging.wire import open_envelope
from scheduler.engine.batch import BatchApplier, BatchOutcome
from scheduler.engine.incoming import Incoming, decode

log = logging.getLogger(__name__)
ENGINE_QUEUES = (ACTIVATION_QUEUE, RESULTS_QUEUE)  # activations first: they start runs
IDLE_WAIT_S = 0.02
RECOVER_EVERY_S = 10.0


class EngineConsumer:
    """Takes message batches from Redis and hands them to a :class:`BatchApplier`."""

    def __init__(
        self, reader: BatchReader, applier: BatchApplier, *, batch_size: int,
        on_outcome: Callable[[BatchOutcome], None] | None = None,
    ) -> None:
        self._reader = reader
        self._applier = applier
        self._batch_size = batch_size
        self._on_outcome = on_outcome
        self.stopping = threading.Event()

    def run(self) -> None:
        """Consume until :attr:`stopping` is set."""
        next_recovery = 0.0
        while not self.stopping.is_set():
            if time.monotonic() >= next_recovery:
                if moved := self._reader.recover_orphans():
                    log.info("requeued %d messages of a stopped engine", moved)
                next_recovery = time.monotonic() + RECOVER_EVERY_S
            raws = self._reader.take(self._batch_size, IDLE_WAIT_S)
            if raws:
                self._flush(raws)

    def _flush(self, raws: list[bytes]) -> None:
        batch = [item for raw in raws if (item := _decode(raw)) is not None]
        try:
            outcome = self._applier.apply(batch)
        except Exception:
            log.exception("batch of %d messages failed; requeued", len(raws))
            self._reader.requeue()
            self.stopping.wait(1.0)
            return
        self._reader.ack()
        if self._on_outcome is not None:
            self._on_outcome(outcome)


def _decode(raw: bytes) -> Incoming | None:
    try:
        received = open_envelope(raw)
    except ValueError as error:
        log.warning("dropping a message that is no Celery task message: %s", error)
        return None
    return decode(received.task_name, [[received.payload]])
