"""Reading ``stellwerk.notify``: batches in, deliveries and live events out, ack last.

Messages are taken in batches with the engine's reliable reader (moved atomically
into this runner's processing list; a runner that dies has its list put back by any
other reader once its liveness key expires). For each batch, in one transaction, the
message ids are recorded as consumed and the deliveries inserted; the events go onto
the live stream just before the commit; the batch is acknowledged only after it. A
crash before the commit replays the batch (the live stream may then show an event
twice); a crash after it, before the ack, replays it too and the ids skip it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

import redis
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.messages import NOTIFY_TASK, NotifyBatch
from common.messaging.reliable import BatchReader
from common.messaging.wire import open_envelope
from scheduler.notify.live import append_events
from scheduler.notify.recording import record_batches

log = logging.getLogger("stellwerk.notify")
BATCH_SIZE = 200
BLOCK_S = 1.0


class Intake:
    """Consumes notify messages until :attr:`stopping` is set."""

    def __init__(
        self, reader: BatchReader, sessions: sessionmaker[Session], client: redis.Redis, *,
        clock: Callable[[], datetime], stopping: threading.Event,
        on_deliveries: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_deliveries`` is called after a commit that added deliveries."""
        self._reader = reader
        self._sessions = sessions
        self._client = client
        self._clock = clock
        self._on_deliveries = on_deliveries
        self.stopping = stopping

    def run(self) -> None:
        """Take and apply batches until stopped."""
        while not self.stopping.is_set():
            self._reader.recover_orphans_if_due()
            raws = self._reader.take(BATCH_SIZE, BLOCK_S)
            if raws:
                self.apply(raws)

    def apply(self, raws: list[bytes]) -> None:
        """Record one batch, then acknowledge it; on failure put it back and pause."""
        batches = [batch for raw in raws if (batch := _decode(raw)) is not None]
        try:
            with self._sessions.begin() as session:
                recorded = record_batches(session, batches, self._clock())
                append_events(self._client, recorded.events)
        except Exception:
            log.exception("a batch of %d notify messages failed; requeued", len(raws))
            self._reader.requeue()
            self.stopping.wait(1.0)
            return
        self._reader.ack()
        if recorded.deliveries:
            self._on_deliveries()


def _decode(raw: bytes) -> NotifyBatch | None:
    try:
        received = open_envelope(raw)
        if received.task_name != NOTIFY_TASK:
            raise ValueError(f"task {received.task_name!r} is not {NOTIFY_TASK!r}")
        return NotifyBatch.model_validate(received.payload)
    except (ValueError, ValidationError) as error:
        log.warning("dropping a malformed notify message: %s", error)
        return None
