"""The delivery loop: claims due deliveries and sends them on a pool of threads.

Up to ``concurrency`` deliveries are in flight at once; the loop claims only as many
as it has free threads, so a claimed delivery never waits in a local queue while its
lease runs. It wakes when the intake has recorded new deliveries and otherwise looks
for due retries (and deliveries left by a runner that died) once per poll interval.

PostgreSQL unreachable is an outage (logged once, retried with capped backoff): the
loop keeps claiming at the backoff's pace, and a thread that sent a delivery keeps
trying to record the outcome until the server is back or its lease has run out (then
another runner sends it again). A webhook that fails is no outage, only a failed try.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from common.outage import Outage
from common.unreachable import database_unreachable
from scheduler.notify.backoff import NextStep, RetryPolicy, after_attempt
from scheduler.notify.deliveries import Attempt, Claimed, DeliveryStore
from scheduler.notify.senders import Sender

log = logging.getLogger("stellwerk.notify")
POLL = timedelta(seconds=1)
PRUNE_EVERY = timedelta(minutes=10)
KEEP_FINISHED = timedelta(days=7)
# A claim outlives the send it covers by this much, so that a slow but live runner
# still records its outcome before another runner may take the delivery.
LEASE_MARGIN = timedelta(seconds=5)


class DeliveryLoop:
    """Sends pending deliveries until :attr:`stopping` is set."""

    def __init__(
        self, store: DeliveryStore, senders: Mapping[str, Sender], policy: RetryPolicy, *,
        concurrency: int, send_timeout: timedelta, clock: Callable[[], datetime],
        stopping: threading.Event, rand: Callable[[], float] = random.random,
    ) -> None:
        """``senders`` by target kind (``webhook``, ``celery_task``)."""
        self._store = store
        self._senders = senders
        self._policy = policy
        self._concurrency = concurrency
        self._lease = send_timeout + LEASE_MARGIN
        self._clock = clock
        self._rand = rand
        self._slots = threading.Semaphore(concurrency)
        self._next_prune = 0.0
        self._database = Outage("PostgreSQL", log)
        self.outages = [self._database]
        self.stopping = stopping
        self.wake = threading.Event()

    def run(self) -> None:
        """Claim and send until stopped; deliveries in flight are finished first."""
        with ThreadPoolExecutor(self._concurrency, thread_name_prefix="delivery") as pool:
            while not self.stopping.is_set():
                if not self._slots.acquire(timeout=POLL.total_seconds()):
                    continue  # every thread busy
                claimed = self._claim()
                for delivery in claimed or []:
                    pool.submit(self._deliver, delivery)
                if claimed == []:
                    self._prune_if_due()
                    self.wake.wait(POLL.total_seconds())
                    self.wake.clear()

    def _claim(self) -> list[Claimed] | None:
        """Claim as many deliveries as there are free threads (one slot is already held).

        None when PostgreSQL is unreachable, after the outage's wait.
        """
        free = 1
        while free < self._concurrency and self._slots.acquire(blocking=False):
            free += 1
        claimed: list[Claimed] | None = []
        wait_s = 0.0
        try:
            claimed = self._store.claim(free, self._clock(), self._lease)
            self._database.succeeded()
        except Exception as error:
            if not database_unreachable(error):
                log.exception("could not claim deliveries; trying again")
            else:
                claimed = None
                wait_s = self._database.failed(error)
        for _ in range(free - len(claimed or [])):
            self._slots.release()
        if claimed is None:
            self.stopping.wait(wait_s)
        return claimed

    def _deliver(self, delivery: Claimed) -> None:
        try:
            self.deliver(delivery)
        except Exception:
            log.exception("delivery %s failed unexpectedly; it is retried after its lease",
                          delivery.id)
        finally:
            self._slots.release()

    def deliver(self, delivery: Claimed) -> None:
        """Send one claimed delivery and record the try and what follows from it."""
        at, started = self._clock(), time.monotonic()
        sent = self._senders[delivery.target].send(delivery)
        attempt = Attempt(at, 1000 * (time.monotonic() - started), sent.status_code, sent.error)
        step = after_attempt(delivery.attempt, sent.ok, self._policy, self._clock(),
                             self._rand(), permanent=sent.permanent)
        kept = self._finish(delivery, attempt, step)
        self.wake.set()  # the run's next event to this subscription may go now
        self._wake_for(step)
        log.log(
            logging.INFO if sent.ok else logging.WARNING,
            "delivery %s (%s, event %s) to subscription %s: try %d at %s: %s in %.0f ms -> %s%s%s",
            delivery.id, delivery.event, delivery.event_id, delivery.subscription_id,
            delivery.attempt, at.isoformat(), attempt.summary, attempt.duration_ms, step.state,
            f" (next try at {step.due_at.isoformat()})" if step.due_at else "",
            "" if kept else " [not recorded: its lease had expired and another runner took it]",
        )

    def _finish(self, delivery: Claimed, attempt: Attempt, step: NextStep) -> bool:
        """Record the outcome, waiting out an outage unless stopping (then False: resent)."""
        while True:
            try:
                kept = self._store.finish(delivery, attempt, step)
            except Exception as error:
                if not database_unreachable(error):
                    raise
                if self.stopping.wait(self._database.failed(error)):
                    return False
                continue
            self._database.succeeded()
            return kept

    def _wake_for(self, step: NextStep) -> None:
        """Wake the loop when a retry sooner than the next poll falls due."""
        if step.due_at is None:
            return
        delay_s = (step.due_at - self._clock()).total_seconds()
        if delay_s < POLL.total_seconds():
            timer = threading.Timer(max(delay_s, 0.0), self.wake.set)
            timer.daemon = True
            timer.start()

    def _prune_if_due(self) -> None:
        if time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + PRUNE_EVERY.total_seconds()
        try:
            if pruned := self._store.prune(self._clock() - KEEP_FINISHED):
                log.info("pruned %d finished deliveries older than %s", pruned, KEEP_FINISHED)
        except Exception as error:
            if not database_unreachable(error):
                log.exception("could not prune finished deliveries")
                return
            self._database.failed(error)
            self._next_prune = 0.0  # pruned once the server is back
