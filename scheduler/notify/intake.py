"""Taking notify events from PostgreSQL: deliveries in, rows out, one transaction.

Writers record events in ``notify_events`` with the change they tell of
(``common.persistence.notify_events``). The intake takes the oldest rows, inserts the
deliveries they cause and deletes them, in one transaction, under a transaction-scoped
advisory lock: with several runners only one takes at a time, each sees the rows of the
previous one gone, and rows go in ``id`` order. Two rows about one run are written by
transactions that held the run's lock in turn, so the later has the larger id: a run's
events become deliveries in order. A runner that dies before its commit leaves the rows
for the next; losing Redis loses nothing (issue 13).

After the commit the events go onto the live stream (SSE), best effort: a Redis that is
down costs the live stream those events, never a delivery. The intake wakes on
PostgreSQL ``NOTIFY`` and polls once a second; PostgreSQL or Redis unreachable is an
outage, logged once, waited out with capped backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import redis
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.messages import Event
from common.outage import Outage
from common.persistence.db import driver
from common.persistence.queries import FORGET_NOTIFY_EVENTS, LOCK_NOTIFY_INTAKE, TAKE_NOTIFY_EVENTS
from common.unreachable import REDIS_UNREACHABLE, database_unreachable
from scheduler.notify.recording import record_deliveries
from scheduler.notify.wakeup import Wakeup
from scheduler.services.live_events import append_events

log = logging.getLogger("stellwerk.notify")
BATCH_ROWS = 100
POLL = timedelta(seconds=1)
# Any constant that no other advisory lock of Stellwerk uses ("notify" in ASCII).
INTAKE_LOCK = 0x6E6F74696679


class Intake:
    """Turns recorded events into deliveries until :attr:`stopping` is set."""

    def __init__(
        self, sessions: sessionmaker[Session], wakeup: Wakeup, client: redis.Redis, *,
        clock: Callable[[], datetime], stopping: threading.Event,
        on_deliveries: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_deliveries`` is called after a commit that added deliveries."""
        self._sessions = sessions
        self._wakeup = wakeup
        self._client = client
        self._clock = clock
        self._on_deliveries = on_deliveries
        self._database = Outage("PostgreSQL", log)
        self._redis = Outage("Redis", log)
        self._live_retry_at = 0.0
        self.outages = [self._database, self._redis]
        self.stopping = stopping

    def run(self) -> None:
        """Take batches until stopped; wait for a wake-up when there is nothing to take."""
        try:
            while not self.stopping.is_set():
                self.turn()
        finally:
            self._wakeup.close()

    def turn(self) -> None:
        """Listen, take what is there, then wait for more (or out an outage)."""
        try:
            self._wakeup.listen()
            while self.take() and not self.stopping.is_set():
                pass
            self._database.succeeded()
            self._wakeup.wait(POLL)
            self._probe_redis()
        except Exception as error:
            self._wakeup.close()
            if not database_unreachable(error):
                log.exception("taking notify events failed; trying again")
                self.stopping.wait(POLL.total_seconds())
                return
            self.stopping.wait(self._database.failed(error))

    def take(self) -> bool:
        """Record the deliveries of the oldest rows and delete them; True if more may wait."""
        with self._sessions.begin() as session:
            conn = driver(session)
            conn.execute(LOCK_NOTIFY_INTAKE, (INTAKE_LOCK,))
            rows = conn.execute(TAKE_NOTIFY_EVENTS, (BATCH_ROWS,)).fetchall()
            if not rows:
                return False
            events = [event for _, raw in rows for event in _decode(raw)]
            deliveries = record_deliveries(session, events, self._clock())
            conn.execute(FORGET_NOTIFY_EVENTS, ([row_id for row_id, _ in rows],))
        self._append_live(events)
        if deliveries:
            self._on_deliveries()
        return len(rows) == BATCH_ROWS

    def _append_live(self, events: list[Event]) -> None:
        """Put the events on the live stream; while Redis is down, only at the retry times."""
        self._call_redis(lambda: append_events(self._client, events))

    def _probe_redis(self) -> None:
        """While Redis is down, ask it at the retry times, so that a quiet intake sees it back."""
        if not self._redis.healthy:
            self._call_redis(self._client.ping)

    def _call_redis(self, call: Callable[[], object]) -> None:
        if not self._redis.healthy and time.monotonic() < self._live_retry_at:
            return
        try:
            call()
        except REDIS_UNREACHABLE as error:
            self._live_retry_at = time.monotonic() + self._redis.failed(error)
            return
        self._redis.succeeded()


def _decode(raw: Any) -> list[Event]:
    """The events of one row; a malformed row is dropped with a warning (it cannot heal)."""
    try:
        return [Event.model_validate(event) for event in raw]
    except (TypeError, ValidationError) as error:
        log.warning("dropping a malformed row of notify events: %s", error)
        return []
