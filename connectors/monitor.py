"""Heartbeats and cancel checks of every call in flight, from one loop.

The worker's watchdog, for coroutines: each running attempt is a :class:`Watch`; a
single task wakes every ``tick``, and for the attempts whose report is due sends their
``started``/``heartbeat`` messages and asks in one call (:func:`redis_cancel_flags`:
one pipelined round trip) whether any of them was cancelled. A cancelled attempt's
``cancelled`` event is set; the attempt aborts its call. 500 calls in flight cost a
few Redis round trips a second, not 500.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

import redis

from common.messaging.keys import cancel_key
from common.outage import Outage
from connectors.results import AttemptReporter, ResultSender

logger = logging.getLogger(__name__)

# Which of these attempts (idempotency keys) have been asked to stop; may block.
CancelFlags = Callable[[Sequence[str]], list[bool]]

STARTED_AFTER = timedelta(milliseconds=200)
TICK = timedelta(milliseconds=50)


class Watch:
    """One attempt in flight, as the monitor sees it."""

    def __init__(self, idempotency_key: str, reporter: AttemptReporter, due: float) -> None:
        self.idempotency_key = idempotency_key
        self.reporter = reporter
        self.due = due
        self.cancelled = asyncio.Event()


class Monitor:
    """Reports the attempts in flight and tells them when they are cancelled."""

    def __init__(
        self,
        cancel_flags: CancelFlags,
        sender: ResultSender,
        interval: timedelta,
        *,
        started_after: timedelta = STARTED_AFTER,
        tick: timedelta = TICK,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cancel_flags = cancel_flags
        self._sender = sender
        self._interval_s = interval.total_seconds()
        self._started_after_s = started_after.total_seconds()
        self._tick_s = tick.total_seconds()
        self._monotonic = monotonic
        self._watches: set[Watch] = set()
        self.redis = Outage("Redis", logger)

    def watch(self, idempotency_key: str, reporter: AttemptReporter) -> Watch:
        """Start watching an attempt; its first report is due after ``started_after``."""
        watch = Watch(idempotency_key, reporter, self._monotonic() + self._started_after_s)
        self._watches.add(watch)
        return watch

    def unwatch(self, watch: Watch) -> None:
        """Stop watching; no message about the attempt is sent by the monitor after this."""
        self._watches.discard(watch)

    async def run(self) -> None:
        """Check every ``tick`` until cancelled."""
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                await self.check()
            except Exception:  # one failed check must not end all heartbeats
                logger.exception("heartbeat check failed")

    async def check(self) -> None:
        """Report the attempts that are due and look up their cancel flags."""
        now = self._monotonic()
        due = [watch for watch in self._watches if watch.due <= now]
        if not due:
            return
        for watch in due:
            watch.due = now + self._interval_s
        # Handed over synchronously, before any await: an attempt that finishes after
        # this point sends its ``finished`` behind these messages.
        self._sender.send(watch.reporter.progress() for watch in due)
        try:
            keys = [watch.idempotency_key for watch in due]
            flags = await asyncio.to_thread(self._cancel_flags, keys)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            self.redis.failed(error)  # logged once; the next tick asks again
            return
        except redis.RedisError as error:
            logger.warning("could not check cancel flags: %s", error)
            return
        self.redis.succeeded()
        for watch, cancelled in zip(due, flags, strict=True):
            if cancelled:
                watch.cancelled.set()


def redis_cancel_flags(client: redis.Redis) -> CancelFlags:
    """The cancel keys of attempts, looked up in one pipelined round trip."""
    def cancelled(idempotency_keys: Sequence[str]) -> list[bool]:
        with client.pipeline(transaction=False) as pipe:
            for key in idempotency_keys:
                pipe.exists(cancel_key(key))
            return [bool(answer) for answer in pipe.execute()]

    return cancelled
