"""Heartbeats of running attempts: started, progress, cancel checks, timeout.

A heartbeat waits ``started_after_s`` (0.2 s) before saying anything, so that a task
shorter than that costs the broker one message (``finished``) instead of three. After
that it reports every heartbeat interval, carrying the log lines captured since the
last message, and checks whether the engine asked the attempt to stop. At the
attempt's deadline it raises the cancel flag; the runtime then reports TIMEOUT.

All heartbeats of a worker are served by one :class:`Watchdog` thread and a timer
heap. A thread per attempt cost about 0.3 ms to start and join, a quarter of the
runtime's own cost for a short task.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from common.outage import Outage
from common.unreachable import redis_unreachable
from workers.context import TaskContext
from workers.reporting import ResultReporter

logger = logging.getLogger(__name__)

STARTED_AFTER_S = 0.2


class Wakeable(Protocol):
    """What the watchdog wakes: a heartbeat, or a bundle due to spill."""

    def wake(self, generation: int) -> None:
        """Called on the watchdog's thread when a wake-up it was given comes due."""


class Watchdog:
    """One thread that wakes each registered heartbeat (or bundle) at its due time."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._due = threading.Condition()
        self._heap: list[tuple[float, int, Wakeable, int]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        # Shared by every heartbeat of the worker: Redis away is one outage, not one per
        # running attempt per beat.
        self.redis = Outage("Redis", logger)

    def schedule(self, when: float, target: Wakeable, generation: int) -> None:
        """Wake ``target`` at ``when`` (monotonic seconds); it ignores stale generations."""
        with self._due:
            heapq.heappush(self._heap, (when, next(self._order), target, generation))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)
                self._thread.start()
            self._due.notify()

    def _run(self) -> None:
        while True:
            with self._due:
                while not self._heap or self._heap[0][0] > self._monotonic():
                    timeout = self._heap[0][0] - self._monotonic() if self._heap else None
                    self._due.wait(timeout)
                _, _, target, generation = heapq.heappop(self._heap)
            try:
                target.wake(generation)
            except Exception:  # one failing wake-up must not stop every heartbeat
                logger.exception("watchdog wake-up failed")


class Heartbeat:
    """Use as a context manager around the processor call."""

    def __init__(
        self,
        ctx: TaskContext,
        reporter: ResultReporter,
        cancel_requested: Callable[[], bool],
        *,
        interval_s: float,
        started_after_s: float = STARTED_AFTER_S,
        monotonic: Callable[[], float] = time.monotonic,
        watchdog: Watchdog | None = None,
    ) -> None:
        self._ctx = ctx
        self._reporter = reporter
        self._cancel_requested = cancel_requested
        self._interval_s = interval_s
        self._started_after_s = started_after_s
        self._monotonic = monotonic
        self._watchdog = watchdog or Watchdog(monotonic)
        self._lock = threading.Lock()  # held while waking: no message after __exit__
        self._generation = 0
        self._stopping = False
        self._timed_out = False
        self._deadline = 0.0
        self._next_report = 0.0

    @property
    def timed_out(self) -> bool:
        """Whether the attempt's deadline passed while it ran."""
        return self._timed_out

    def __enter__(self) -> Heartbeat:
        """Start watching the attempt."""
        start = self._monotonic()
        self._deadline = start + self._ctx.timeout_s
        self._next_report = start + self._started_after_s
        self._ctx.on_heartbeat(self._request_beat)
        self._reschedule()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop watching; no message is sent after this returns."""
        self._ctx.on_heartbeat(None)
        with self._lock:
            self._stopping = True

    def wake(self, generation: int) -> None:
        """Called by the watchdog: time out, report, and schedule the next wake-up."""
        with self._lock:
            if self._stopping or generation != self._generation:
                return  # finished, or superseded by an earlier request
            now = self._monotonic()
            if now >= self._deadline and not self._timed_out:
                self._time_out()
            if now >= self._next_report:
                self._report()
                self._next_report = now + self._interval_s
            self._reschedule()

    def _reschedule(self) -> None:
        self._generation += 1
        when = self._next_report if self._timed_out else min(self._next_report, self._deadline)
        self._watchdog.schedule(when, self, self._generation)

    def _request_beat(self) -> None:
        """``ctx.heartbeat()``: report now instead of at the next interval."""
        with self._lock:
            if not self._stopping:
                self._next_report = self._monotonic()
                self._reschedule()

    def _time_out(self) -> None:
        self._timed_out = True
        self._ctx.log(f"[stellwerk] timeout of {self._ctx.timeout_s:g} s reached: stopping")
        self._ctx.cancel()

    def _report(self) -> None:
        """Check for a cancel request and send the progress message.

        A failure here (Redis unreachable for a moment) must not stop the heartbeats:
        the next one tries again, and the engine's lease covers a few missed beats.
        """
        try:
            if not self._ctx.cancelled and self._cancel_requested():
                self._ctx.log("[stellwerk] cancel requested: stopping")
                self._ctx.cancel()
            self._reporter.progress(self._ctx.logs.drain())
        except Exception as error:
            if not redis_unreachable(error):
                logger.exception("%s: heartbeat failed", self._ctx.label)
            else:  # one line per outage for the whole worker, not one per beat
                self._watchdog.redis.failed(error)
            return
        self._watchdog.redis.succeeded()
