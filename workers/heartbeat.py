"""The companion thread of one running attempt: started, heartbeats, cancel, timeout.

It waits ``started_after_s`` (0.2 s) before saying anything, so that a task shorter
than that costs the broker one message (``finished``) instead of three. After that it
reports every heartbeat interval, carrying the log lines captured since the last
message, and checks whether the engine asked the attempt to stop. At the attempt's
deadline it raises the cancel flag; the runtime then reports TIMEOUT.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from workers.context import TaskContext
from workers.reporting import ResultReporter

logger = logging.getLogger(__name__)

STARTED_AFTER_S = 0.2


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
    ) -> None:
        self._ctx = ctx
        self._reporter = reporter
        self._cancel_requested = cancel_requested
        self._interval_s = interval_s
        self._started_after_s = started_after_s
        self._monotonic = monotonic
        self._wake = threading.Event()
        self._stopping = False
        self._beat_requested = False
        self._timed_out = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat {ctx.idempotency_key}", daemon=True
        )

    @property
    def timed_out(self) -> bool:
        """Whether the attempt's deadline passed while it ran."""
        return self._timed_out.is_set()

    def __enter__(self) -> Heartbeat:
        """Start watching the attempt."""
        self._ctx.on_heartbeat(self._request_beat)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop watching; no message is sent after this returns."""
        self._ctx.on_heartbeat(None)
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _request_beat(self) -> None:
        self._beat_requested = True
        self._wake.set()

    def _run(self) -> None:
        start = self._monotonic()
        deadline = start + self._ctx.timeout_s
        next_report = start + self._started_after_s
        while True:
            wake_at = next_report if self.timed_out else min(next_report, deadline)
            self._wake.wait(max(0.0, wake_at - self._monotonic()))
            self._wake.clear()
            if self._stopping:
                return
            now = self._monotonic()
            if now >= deadline and not self.timed_out:
                self._time_out()
            if now >= next_report or self._beat_requested:
                self._beat_requested = False
                self._report()
                next_report = now + self._interval_s

    def _time_out(self) -> None:
        self._timed_out.set()
        self._ctx.log(f"[stellwerk] timeout of {self._ctx.timeout_s:g} s reached: stopping")
        self._ctx.cancel()

    def _report(self) -> None:
        """Check for a cancel request and send the progress message.

        A failure here (Redis unreachable for a moment) must not end the thread: the
        next beat tries again, and the engine's lease covers a few missed beats.
        """
        try:
            if not self._ctx.cancelled and self._cancel_requested():
                self._ctx.log("[stellwerk] cancel requested: stopping")
                self._ctx.cancel()
            self._reporter.progress(self._ctx.logs.drain())
        except Exception:
            logger.exception("%s: heartbeat failed", self._ctx.label)
