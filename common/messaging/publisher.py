"""Publishing messages to Stellwerk's queues: many messages, one Redis round trip."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import redis
from redis.client import Pipeline

from common.messaging.wire import envelope


@dataclass(frozen=True)
class Outgoing:
    """One message to publish: the Celery task name, its queue, its single argument."""

    queue: str
    task_name: str
    payload: dict[str, Any]
    task_id: str | None = None


def timed_set(queue: str) -> str:
    """The sorted set of ``queue``'s messages not due yet, scored by due time (ms).

    A consumer moves those due into its batch as it takes from the queue
    (``common.messaging.reliable``): a timed message costs its producer one ``ZADD``,
    sent with the rest, instead of a timer that publishes it at its instant.
    """
    return f"{queue}.timed"


class Sink(Protocol):
    """Where messages go: a :class:`Publisher`, or a buffer that sends them later."""

    def publish(self, messages: Iterable[Outgoing]) -> int:
        """Send (or keep for sending) every message, in order."""


class Publisher:
    """Pushes Celery-format messages with one pipelined ``LPUSH`` per batch.

    Celery's ``send_task`` costs about a millisecond of CPU per message here; relaying
    a 10,000-task fan-out through it would cost the engine ten seconds.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def publish(
        self, messages: Iterable[Outgoing], later: Sequence[tuple[datetime, Outgoing]] = (),
    ) -> int:
        """Publish every message, in order; ``later`` into their queues' timed sets.

        ``later`` pairs a message with the time before which no consumer may take it.
        Return how many were sent (timed ones included).
        """
        items = [
            (m.queue, envelope(m.queue, m.task_name, m.payload, m.task_id)) for m in messages
        ]
        if len(items) == 1 and not later:  # a worker's result: a pipeline costs more here
            self._client.lpush(*items[0])
        elif items or later:
            with self._client.pipeline(transaction=False) as pipe:
                _push(pipe, items)
                _defer(pipe, later)
                pipe.execute()
        return len(items) + len(later)

    @staticmethod
    def push(pipe: Pipeline, messages: Iterable[Outgoing]) -> None:
        """Add every message to ``pipe``, in order: sent with the pipeline's other commands."""
        _push(pipe, [(m.queue, envelope(m.queue, m.task_name, m.payload, m.task_id))
                     for m in messages])


def _push(pipe: Pipeline, items: Iterable[tuple[str, str]]) -> None:
    """One ``LPUSH`` per run of messages to the same queue, in order.

    ``LPUSH q a b`` leaves ``a`` to be taken first, as two ``LPUSH`` would; a reader
    blocked on ``q`` then wakes to the whole run (a bundle's results), not to ``a`` alone.
    """
    for queue, run in itertools.groupby(items, key=operator.itemgetter(0)):
        pipe.lpush(queue, *(body for _, body in run))


def _defer(pipe: Pipeline, later: Sequence[tuple[datetime, Outgoing]]) -> None:
    """One ``ZADD`` per queue: each message scored by its due time in milliseconds."""
    by_set: dict[str, dict[str, float]] = {}
    for due_at, m in later:
        body = envelope(m.queue, m.task_name, m.payload, m.task_id)
        by_set.setdefault(timed_set(m.queue), {})[body] = due_at.timestamp() * 1000
    for key, scored in by_set.items():
        pipe.zadd(key, scored)
