"""The beat's precise timer: timed outbox rows published at their due time.

The tick runs once a second and writes, up to a lookahead ahead, the activations of
what falls due before the next tick (runs to start, cron fires, retries), each as an
outbox row with ``due_at``. This thread publishes each at that instant, so a fire's
lateness is the timer's precision plus the engine's step, not the tick's period. The
rows are deleted by the next tick. If the beat dies first, the rows are still in the
outbox and any relay sends them once they are overdue by its grace: late, never lost.
While Redis is down the thread keeps the rows and tries again with capped backoff
(logged once, :class:`common.outage.Outage`), so they go out within about a second of
Redis's return rather than after the relay's grace.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from common.outage import Outage
from common.persistence.outbox import Deferred, OutboxRelay
from common.unreachable import redis_unreachable

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0


class Handoff:
    """A timer heap of deferred rows and one thread that publishes them when due."""

    def __init__(self, relay: OutboxRelay, clock: Callable[[], datetime]) -> None:
        self._relay = relay
        self._clock = clock
        self._due = threading.Condition()
        self._heap: list[tuple[datetime, int, Deferred]] = []
        self._order = itertools.count()
        self._sent: list[int] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._late_ms: list[float] = []  # how late each row went out, logged now and then
        self._logged = time.monotonic()
        self.redis = Outage("Redis", log)

    def hand(self, rows: Sequence[Deferred]) -> None:
        """Publish ``rows`` at their due times."""
        if not rows:
            return
        with self._due:
            for row in rows:
                heapq.heappush(self._heap, (row.due_at, next(self._order), row))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="handoff", daemon=True)
                self._thread.start()
            self._due.notify()

    def take_sent(self) -> list[int]:
        """Ids of the rows published since the last call, for the tick to delete."""
        with self._due:
            sent, self._sent = self._sent, []
        return sent

    def stop(self, timeout_s: float) -> None:
        """Publish what is waiting (all due within the lookahead), then stop the thread.

        Whatever is not sent within ``timeout_s`` stays in the outbox for a relay.
        """
        with self._due:
            self._stopping = True
            self._due.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._due:
                batch = self._wait_for_due()
            if batch is None:
                return
            try:
                self._relay.publish_written([row.message for row in batch])
            except Exception as error:  # the rows stay in the outbox: a relay sends them later
                if redis_unreachable(error):
                    self._keep(batch, self.redis.failed(error))
                else:
                    log.exception("publishing %d timed messages failed", len(batch))
                continue
            self.redis.succeeded()
            with self._due:
                self._sent += [row.id for row in batch]
            self._account(batch)

    def _keep(self, batch: list[Deferred], wait_s: float) -> None:
        """Put ``batch`` back to be tried again after ``wait_s`` (unless stopping).

        A stopping beat leaves them: they are in the outbox, and a relay sends them.
        """
        with self._due:
            if self._stopping:
                return
            for row in batch:
                heapq.heappush(self._heap, (row.due_at, next(self._order), row))
            self._due.wait(wait_s)

    def _account(self, batch: list[Deferred]) -> None:
        """Log how late the timed messages went out, every ``LOG_EVERY_S``."""
        sent = self._clock()
        self._late_ms += [(sent - row.due_at).total_seconds() * 1000 for row in batch]
        if time.monotonic() - self._logged >= LOG_EVERY_S:
            late = sorted(self._late_ms)
            log.info("published %d timed messages, late by p50 %.1f ms, max %.1f ms",
                     len(late), late[len(late) // 2], late[-1])
            self._late_ms, self._logged = [], time.monotonic()

    def _wait_for_due(self) -> list[Deferred] | None:
        """Every row due now (waiting until one is); None once stopping with none left."""
        while self._heap or not self._stopping:
            if not self._heap:
                self._due.wait()
                continue
            delay = (self._heap[0][0] - self._clock()).total_seconds()
            if delay > 0:
                self._due.wait(delay)
                continue
            batch = []
            while self._heap and self._heap[0][0] <= self._clock():
                batch.append(heapq.heappop(self._heap)[2])
            return batch
        return None
