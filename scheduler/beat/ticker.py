"""The beat loop: every duty once per tick; what falls due before the next, on time.

Runs to start, cron fires and retries due within the lookahead (two ticks) are
written as timed outbox rows and relayed at once into Redis's timed set of their
queue, from which the engine takes each once due. Lateness is then milliseconds
whatever the load (a tick woken for every due run cost a whole tick per fire, and a
timer thread publishing each at its instant cost the beat 0.3 ms of CPU a fire).
The firing duties run ``STEPS_PER_TICK`` times a tick, so a busy second's fires are
written in small slices; the other duties once a tick.

An unreachable Redis or PostgreSQL ends no tick loop (issue 13): the outage is logged
once, the tick is tried again after a capped backoff (at most a second), and the
beat fires again within about a second of the server's return. What falls due in the
meantime is fired late, never skipped (the cron fire policy decides about misses).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from psycopg.rows import args_row
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.loop_timings import LoopTimings
from common.outage import Outage
from common.persistence.db import HeldConnection
from common.persistence.outbox import OutboxRelay
from common.persistence.queries import FIRING_DUE, WATCH_DUE
from common.unreachable import database_unreachable, outage_wait, redis_unreachable
from scheduler.beat import crons, duties, flow, timers

log = logging.getLogger(__name__)
PRUNE_EVERY = timedelta(minutes=1)
KEEP_CONSUMED = timedelta(days=1)
# Writers publish their own outbox rows right after commit and delete them in their
# next transaction; the beat sends what a crashed writer left, once it is this old.
# Generous on purpose: publishing a 10,000-task fan-out takes seconds, and a grace
# shorter than that made the beat send half of it a second time (measured).
RELAY_GRACE = timedelta(seconds=30)
# The firing duties run this many times a tick, so that a busy second's fires are
# written in small slices (a burst of hundreds at once delayed everything else).
STEPS_PER_TICK = 5
# A duty claims what is due at ``now`` and returns the outbox rows it wrote.
Duty = Callable[[Session, datetime], list[int]]


class FiringDue(NamedTuple):
    """A row of ``FIRING_DUE``: which firing duties have anything to do."""

    crons: bool
    buffered: bool
    runs: bool
    retries: bool


@dataclass(frozen=True)
class WhenDue:
    """A watch duty that runs only when ``WATCH_DUE``'s column ``flag`` says it has work."""

    flag: str
    duty: Duty

    def __call__(self, session: Session, now: datetime) -> list[int]:
        """Run the duty (the ticker calls it only when its flag is set)."""
        return self.duty(session, now)


# A chore runs in transactions of its own after a full tick (retention's batches).
Chore = Callable[[datetime], object]


class Ticker:
    """Runs the beat's duties until :attr:`stopping` is set."""

    def __init__(
        self, sessions: sessionmaker[Session], relay: OutboxRelay, interval: timedelta,
        clock: Callable[[], datetime], cancel_grace: timedelta = timedelta(seconds=30),
        *, fire_crons: bool = True, watch: Sequence[Duty] = (),
        timings: LoopTimings | None = None, ping_redis: Callable[[], object] = lambda: None,
        chores: Sequence[Chore] = (),
    ) -> None:
        self._timings = timings  # for GET /metrics
        # A tick that publishes nothing does not tell whether Redis is back: asked
        # before each tick while Redis is down.
        self._ping_redis = ping_redis
        self.redis = Outage("Redis", log)
        self.database = Outage("PostgreSQL", log)
        self._relay_until = 0.0  # monotonic: relay what failed publishes left until then
        self._sessions = sessions
        # The run timers (every ticker has them), then the watch duties it was given: lost
        # attempts, task timeouts, suspension, lateness, flow admission.
        self._watch: tuple[Duty, ...] = (
            WhenDue("cancel_grace", partial(timers.signal_cancel_grace, grace=cancel_grace)),
            WhenDue("run_timeouts", timers.signal_run_timeouts),
            *watch,
        )
        self._chores = chores  # retention
        self._fire_crons = fire_crons  # False: STELLWERK_DISABLE_CRON
        self._cancel_grace = cancel_grace
        self._relay = relay
        # Outbox rows a tick wrote and could not relay (Redis was down): tried again at
        # every step, so that they go out as Redis is back, not after the relay's grace.
        self._unrelayed: list[int] = []
        self._probe = HeldConnection(sessions)
        self._interval = interval
        self._lookahead = 2 * interval
        self._clock = clock
        self._last_prune: datetime | None = None
        self._steps = 0
        self.stopping = threading.Event()

    def tick(self) -> datetime:
        """The firing duties; every ``STEPS_PER_TICK``-th time, all the others too.

        Return when to step next. A step with nothing to fire (and not a full one) opens
        no transaction: its probe runs alone, in autocommit.
        """
        now = self._clock()
        horizon = now + self._lookahead
        full = self._steps % STEPS_PER_TICK == 0
        self._steps += 1
        due = self._firing_due(horizon)
        if not full and not self._has_work(due):
            self._relay_left(now)
            return now + self._interval / STEPS_PER_TICK
        with self._sessions.begin() as session:
            ids = self._fire(session, now, horizon, due)
            if full:
                ids += self._watch_over(session, now)
        self._unrelayed += ids
        self._relay_left(now)
        if full:
            self._relay.relay_pending(min_age=RELAY_GRACE)
            for chore in self._chores:  # last: what is due is fired and handed over
                chore(now)
        return now + self._interval / STEPS_PER_TICK

    def _relay_left(self, now: datetime) -> None:
        """Relay the rows written and not relayed yet, timed ones into their timed sets."""
        if not self._unrelayed:
            return
        try:
            self._relay.relay_due(self._unrelayed, now)
        except Exception as error:
            if not (redis_unreachable(error) or database_unreachable(error)):
                self._unrelayed = []  # left to the relay of pending rows, after its grace
            raise  # an outage: kept, and tried again at the next step
        self._unrelayed = []

    def _firing_due(self, horizon: datetime) -> FiringDue:
        """``FIRING_DUE`` outside a transaction, on the probe's own connection."""
        due: FiringDue = self._probe.execute(
            FIRING_DUE, {"horizon": horizon}, args_row(FiringDue))
        return due

    def _cron_work(self, due: FiringDue) -> bool:
        return self._fire_crons and (due.crons or due.buffered)

    def _has_work(self, due: FiringDue) -> bool:
        return self._cron_work(due) or due.runs or due.retries

    def _fire(
        self, session: Session, now: datetime, horizon: datetime, due: FiringDue,
    ) -> list[int]:
        """Cron fires, runs to start and retries due by ``horizon``: timed activations.

        The probe (``due``) first says which duties have anything to do (an idle step is
        one round trip, not five); one that comes due just after it is taken a step later.
        """
        fire_crons = self._cron_work(due)
        ids = []
        if fire_crons:  # first: the runs it creates are started below
            ids += crons.fire_due_crons(session, now, horizon - now)
            ids += crons.release_buffered(session, now)
        if due.runs or fire_crons:
            ids += duties.start_due_runs(session, now, horizon)
        if due.retries:
            ids += duties.fire_due_retries(session, now, horizon)
        return ids

    def _watch_over(self, session: Session, now: datetime) -> list[int]:
        """Leases, timers, lost attempts, suspension, lateness, pruning: once a tick.

        As for firing, one query says which duties of a row's time have work.
        """
        due = session.execute(
            WATCH_DUE, {"now": now, "grace_over": now - self._cancel_grace,
                        "limits_since": now - flow.REPAIR_FOR}).one()._mapping
        ids = []
        for duty in self._watch:
            if not isinstance(duty, WhenDue) or due[duty.flag]:
                ids += duty(session, now)
        if self._last_prune is None or now - self._last_prune >= PRUNE_EVERY:
            duties.prune_consumed(session, now, KEEP_CONSUMED)
            self._last_prune = now
        return ids

    @property
    def outages(self) -> list[Outage]:
        """Redis and PostgreSQL as the tick sees them, for the health status."""
        return [self.redis, self.database]

    def run(self) -> None:
        """Tick until stopped; an outage is waited out, another error logged, then tick again."""
        try:
            while not self.stopping.is_set():
                began = time.monotonic()
                delay_s = self._step()
                if self._timings is not None:
                    self._timings.observe(time.monotonic() - began)
                if delay_s > 0:
                    self.stopping.wait(delay_s)
        finally:
            self._probe.close()  # held across ticks: closed here, not left to the exit
        if self._unrelayed:
            log.warning("%d outbox rows not relayed at stop: a relay sends them after its "
                        "grace", len(self._unrelayed))

    def _step(self) -> float:
        """One tick, or the wait an outage asks for; return seconds until the next step."""
        try:
            if not self.redis.healthy:
                self._ping_redis()
                self.redis.succeeded()
                self._relay_until = time.monotonic() + self._lookahead.total_seconds()
            wake = self.tick()
            if time.monotonic() < self._relay_until:
                # Rows a failed publish left (fires due now, or within the lookahead):
                # sent as they fall due, not after the relay's grace.
                self._relay.relay_pending()
        except Exception as error:
            wait_s = outage_wait(error, self.redis, self.database)
            if wait_s is not None:
                return wait_s
            log.exception("beat tick failed")
            return self._interval.total_seconds()
        self.database.succeeded()
        return (wake - self._clock()).total_seconds()
