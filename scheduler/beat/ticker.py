"""The beat loop: every duty once per tick, waking early for a run due before the tick.

Waking exactly at the earliest due time (instead of polling every 100 ms) keeps a
one-off run's lateness to milliseconds while an idle beat costs one query a second.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from common.persistence.outbox import OutboxRelay
from scheduler.beat import crons, duties, timers

log = logging.getLogger(__name__)
PRUNE_EVERY = timedelta(minutes=1)
KEEP_CONSUMED = timedelta(days=1)
# Writers publish their own outbox rows right after commit and delete them in their
# next transaction; the beat sends what a crashed writer left, once it is this old.
# Generous on purpose: publishing a 10,000-task fan-out takes seconds, and a grace
# shorter than that made the beat send half of it a second time (measured).
RELAY_GRACE = timedelta(seconds=30)
# A duty claims what is due at ``now`` and returns the outbox rows it wrote.
Duty = Callable[[Session, datetime], list[int]]


class Ticker:
    """Runs the beat's duties until :attr:`stopping` is set."""

    def __init__(
        self, sessions: sessionmaker[Session], relay: OutboxRelay, interval: timedelta,
        clock: Callable[[], datetime], cancel_grace: timedelta = timedelta(seconds=30),
        *, fire_crons: bool = True, watch: Sequence[Duty] = (),
    ) -> None:
        self._sessions = sessions
        self._watch = watch  # lost attempts, task timeouts, suspension, lateness
        self._fire_crons = fire_crons  # False: STELLWERK_DISABLE_CRON
        self._cancel_grace = cancel_grace
        self._relay = relay
        self._interval = interval
        self._clock = clock
        self._last_prune: datetime | None = None
        self.stopping = threading.Event()

    def tick(self) -> datetime:
        """Do every duty once; return when to wake up next."""
        now = self._clock()
        with self._sessions.begin() as session:
            ids = duties.start_due_runs(session, now)
            if self._fire_crons:
                ids += crons.fire_due_crons(session, now) + crons.release_buffered(session, now)
            ids += duties.fire_due_retries(session, now)
            ids += duties.expire_leases(session, now)
            ids += timers.fire_run_timers(session, now, self._cancel_grace)
            for duty in self._watch:
                ids += duty(session, now)
            if self._last_prune is None or now - self._last_prune >= PRUNE_EVERY:
                duties.prune_consumed(session, now, KEEP_CONSUMED)
                self._last_prune = now
        self._relay.relay_ids(ids)
        self._relay.relay_pending(min_age=RELAY_GRACE)
        with self._sessions() as session:
            wake = duties.next_wakeup(session, self._clock(), self._interval)
            return crons.next_wakeup(session, self._clock(), wake) if self._fire_crons else wake

    def run(self) -> None:
        """Tick until stopped; an error is logged and the next tick tries again."""
        while not self.stopping.is_set():
            try:
                wake = self.tick()
            except Exception:
                log.exception("beat tick failed")
                wake = self._clock() + self._interval
            delay = (wake - self._clock()).total_seconds()
            if delay > 0:
                self.stopping.wait(delay)
