"""Draining ``stellwerk.jobs``: each request in its own transaction, acknowledged after.

Messages are taken with the engine's reliable reader (``common.messaging.reliable``):
they move into this reader's processing list and are deleted from it only once every
request of the batch is committed. A crash puts them back (any reader requeues the
list of one whose liveness key has expired) and the claimed message ids make the
second delivery change nothing. A failing database puts the batch back at once, to be
retried a second later. Each request's outbox rows are relayed right after its commit,
so the answer reaches the producer at once (the beat relays them otherwise).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from common.messaging.reliable import BatchReader
from common.messaging.wire import open_envelope
from common.persistence.outbox import OutboxRelay
from scheduler.producers.handler import RequestHandler

log = logging.getLogger("stellwerk.producers")
BATCH_SIZE = 50
WAIT_S = 1.0  # how long an idle take blocks: also how soon a stop is noticed
RETRY_AFTER_S = 1.0


class RequestConsumer:
    """Consumes ``stellwerk.jobs`` until :attr:`stopping` is set (see ``NotifyRunner``)."""

    def __init__(
        self, reader: BatchReader, sessions: sessionmaker[Session], handler: RequestHandler,
        relay: OutboxRelay, clock: Callable[[], datetime],
    ) -> None:
        self._reader = reader
        self._sessions = sessions
        self._handler = handler
        self._relay = relay
        self._clock = clock
        self.stopping = threading.Event()

    def run(self) -> None:
        """Consume until :attr:`stopping` is set."""
        while not self.stopping.is_set():
            self._reader.recover_orphans_if_due()
            raws = self._reader.take(BATCH_SIZE, WAIT_S)
            if raws:
                self._apply(raws)

    def _apply(self, raws: list[bytes]) -> None:
        try:
            for raw in raws:  # oldest first
                self._apply_one(raw)
        except Exception:
            log.exception("applying %d queued requests failed; requeued", len(raws))
            self._reader.requeue()
            self.stopping.wait(RETRY_AFTER_S)
            return
        self._reader.ack()

    def _apply_one(self, raw: bytes) -> None:
        try:
            received = open_envelope(raw)
        except ValueError as error:
            log.warning("dropping a message that is no Celery task message: %s", error)
            return
        with self._sessions.begin() as session:
            outbox_ids = self._handler.handle(session, received.payload, self._clock())
        try:
            self._relay.relay_ids(outbox_ids)
        except Exception:
            log.exception("relaying outbox rows %s failed; the beat will send them", outbox_ids)
