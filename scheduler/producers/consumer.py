"""Draining ``stellwerk.jobs``: each request in its own transaction, acknowledged after.

Messages are taken with the engine's reliable reader (``common.messaging.reliable``):
they move into this reader's processing list and are deleted from it only once every
request of the batch is committed. A crash puts them back (any reader requeues the
list of one whose liveness key has expired) and the claimed message ids make the
second delivery change nothing. A failing database puts the batch back at once, to be
retried a second later. Each request's outbox rows are relayed right after its commit,
so the answer reaches the producer at once (the beat relays them otherwise).

PostgreSQL or Redis unreachable is an outage: logged once, waited out with capped
backoff, never the end of the loop. The batch is never lost: one whose acknowledgement
or requeue failed because Redis was down stays in the processing list and is settled
(acknowledged or put back) first thing once Redis answers again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session, sessionmaker

from common.messaging.reliable import BatchReader
from common.messaging.wire import open_envelope
from common.outage import Outage
from common.persistence.outbox import OutboxRelay
from common.unreachable import REDIS_UNREACHABLE, database_unreachable
from scheduler.producers.handler import RequestHandler

log = logging.getLogger("stellwerk.producers")
BATCH_SIZE = 50
WAIT_S = 1.0  # how long an idle take blocks: also how soon a stop is noticed
RETRY_AFTER_S = 1.0
Settle = Literal["ack", "requeue"]


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
        self._database = Outage("PostgreSQL", log)
        self._redis = Outage("Redis", log)
        self._unsettled: Settle | None = None  # what the last batch still needs
        self.outages = [self._database, self._redis]
        self.stopping = threading.Event()

    def run(self) -> None:
        """Consume until :attr:`stopping` is set."""
        while not self.stopping.is_set():
            try:
                self._settle()
                self._reader.recover_orphans_if_due()
                raws = self._reader.take(BATCH_SIZE, WAIT_S)
                self._redis.succeeded()
            except REDIS_UNREACHABLE as error:
                self.stopping.wait(self._redis.failed(error))
                continue
            if raws:
                self._apply(raws)

    def _apply(self, raws: list[bytes]) -> None:
        """Apply the batch, then acknowledge it; on failure put it back and pause."""
        self._unsettled = "requeue"
        try:
            for raw in raws:  # oldest first
                self._apply_one(raw)
            self._database.succeeded()
            self._unsettled = "ack"
            wait_s = 0.0
        except Exception as error:
            if database_unreachable(error):
                wait_s = self._database.failed(error)
            else:
                log.exception("applying %d queued requests failed; requeued", len(raws))
                wait_s = RETRY_AFTER_S
        try:
            self._settle()
        except REDIS_UNREACHABLE as error:
            wait_s = max(wait_s, self._redis.failed(error))
        self.stopping.wait(wait_s)

    def _settle(self) -> None:
        """Acknowledge or requeue the last batch, if it still needs it (raises if Redis is down)."""
        if self._unsettled == "ack":
            self._reader.ack()
        elif self._unsettled == "requeue":
            self._reader.requeue()
        self._unsettled = None

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
        except Exception as error:
            if isinstance(error, REDIS_UNREACHABLE) or database_unreachable(error):
                log.warning("relaying outbox rows %s failed (%s); the beat will send them",
                            outbox_ids, type(error).__name__)
            else:
                log.exception("relaying outbox rows %s failed; the beat will send them",
                              outbox_ids)
