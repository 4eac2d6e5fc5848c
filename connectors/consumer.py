"""Taking messages from ``tasks.http`` and ``tasks.webservice`` with kombu, on a thread.

kombu is not asyncio, and its channel must be used by one thread only: this thread
fetches, hands each message to the event loop as a :class:`Delivery`, and acks (or
requeues) it when the loop says so, which is once its attempts are claimed. It stops
fetching while the connector holds as many attempts as its ``--concurrency``
(:class:`Gate`), so a backlog stays in Redis, where another connector can take it,
instead of piling up in this process.

A Redis outage ends nothing: the consumer logs it once, reconnects with capped backoff
(at most a second apart, :class:`common.outage.Outage`) and says when it is over.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kombu import Connection, Consumer, Exchange, Message, Queue

from common.messaging.messages import EXECUTE_BUNDLE_TASK
from common.outage import Outage

logger = logging.getLogger(__name__)

POLL = timedelta(milliseconds=50)


class Gate:
    """How many attempts the connector holds (received, not yet finished); thread-safe."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held = 0
        self._changed = threading.Condition()

    @property
    def held(self) -> int:
        """Attempts received and not yet finished."""
        return self._held

    def wait_for_room(self, timeout: timedelta) -> bool:
        """Whether there is room for more, waiting up to ``timeout`` for it."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._held < self._limit, timeout.total_seconds()
            )

    def take(self, count: int) -> None:
        """Count ``count`` more attempts as held."""
        with self._changed:
            self._held += count

    def release(self, count: int = 1) -> None:
        """``count`` attempts are done (or were never run)."""
        with self._changed:
            self._held -= count
            self._changed.notify_all()


@dataclass(frozen=True)
class Delivery:
    """One broker message: its Celery task name, its single argument, how to settle it."""

    task_name: str | None
    payload: Any
    attempts: int
    settle: Callable[[bool], None]  # True: ack; False: back to the queue. Any thread.


def attempt_count(task_name: str | None, payload: Any) -> int:
    """How many attempts a message carries (a bundle several, anything else one)."""
    if task_name == EXECUTE_BUNDLE_TASK and isinstance(payload, dict):
        dispatches = payload.get("dispatches")
        if isinstance(dispatches, list) and dispatches:
            return len(dispatches)
    return 1


class QueueConsumer:
    """Consumes ``queues`` until :meth:`stop`, handing each message to ``deliver``."""

    def __init__(
        self, redis_url: str, queues: Sequence[str], gate: Gate,
        deliver: Callable[[Delivery], None], *, prefetch: int = 16,
    ) -> None:
        self._url = redis_url
        self._queues = [Queue(name, Exchange(name), routing_key=name) for name in queues]
        self._gate = gate
        self._deliver = deliver
        self._prefetch = prefetch
        self._settlements: queue.SimpleQueue[tuple[Message, bool]] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self.redis = Outage("Redis", logger)

    def stop(self) -> None:
        """Stop fetching; messages not yet settled go back to their queues."""
        self._stopping.set()

    def run(self) -> None:
        """Consume until stopped, reconnecting after a broker error."""
        while not self._stopping.is_set():
            try:
                self._consume()
            except Exception as error:  # the broker went away: wait, then reconnect
                self._stopping.wait(self.redis.failed(error))

    def _consume(self) -> None:
        with Connection(self._url) as connection:
            consumer = Consumer(
                connection.channel(), queues=self._queues, callbacks=[self._on_message],
                accept=["json"], prefetch_count=self._prefetch,
                on_decode_error=self._on_undecodable,
            )
            self.redis.succeeded()  # the channel is open: Redis answered
            with consumer:
                while not self._stopping.is_set():
                    self._settle_pending()
                    if not self._gate.wait_for_room(POLL):
                        continue
                    with contextlib.suppress(TimeoutError):  # nothing came: settle, look again
                        connection.drain_events(timeout=POLL.total_seconds())
                self._settle_pending()

    def _on_message(self, body: Any, message: Message) -> None:
        task_name = message.headers.get("task")
        payload = _single_argument(body)
        count = attempt_count(task_name, payload)
        self._gate.take(count)
        settle: Callable[[bool], None] = lambda ack: self._settlements.put((message, ack))  # noqa: E731
        self._deliver(Delivery(task_name, payload, count, settle))

    def _on_undecodable(self, message: Message, error: Exception) -> None:
        logger.error("dropped a message that is not JSON: %s", error)
        message.ack()

    def _settle_pending(self) -> None:
        while True:
            try:
                message, ack = self._settlements.get_nowait()
            except queue.Empty:
                return
            try:
                if ack:
                    message.ack()
                else:
                    message.requeue()
            except Exception as error:  # its channel is gone; the broker restores it
                logger.warning("could not settle a message (%s)", error)


def _single_argument(body: Any) -> Any:
    """The one argument of a Celery protocol-2 body ``[args, kwargs, embed]``."""
    if isinstance(body, list | tuple) and body and isinstance(body[0], list | tuple) and body[0]:
        return body[0][0]
    return None
