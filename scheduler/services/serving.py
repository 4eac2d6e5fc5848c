"""Which task types no live worker serves, said where a user looks (issue 14).

A task of a type nobody serves is accepted (an outside system may post its outcome),
but it waits READY with no sign of why. So a job's answer carries a warning per such
type, and a run's READY tasks say what they wait for. A task of a registered worker
type is served by whoever serves its engine (``webservice`` or ``http``: the connector).

The live workers come from Redis (their liveness records); :class:`ServedTypes` keeps
the answer for a second, so a page polled by many costs one read a second (one thread
reads while the others answer with what was read before), and says nothing (rather
than failing the request) when Redis does not answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import redis

from common.domain.states import TaskState
from common.domain.worker_types import dispatched_as
from scheduler.services.processors import worker_types

FRESH_FOR = timedelta(seconds=1)


def not_served(task_type: str) -> str:
    """The words for a type no live worker serves."""
    return f"no worker serves type {task_type!r}"


def unserved_warnings(
    tasks: Iterable[tuple[str, Mapping[str, Any] | None]], served: frozenset[str] | None
) -> list[str]:
    """One warning per task type (with its binding) that no live worker serves, sorted."""
    if served is None:
        return []
    unserved = {task_type for task_type, binding in tasks
                if dispatched_as(task_type, binding) not in served}
    return [f"{not_served(t)}: its tasks wait READY until one starts or their outcome is "
            f"posted" for t in sorted(unserved)]


def waiting_for(
    state: str, task_type: str, binding: Mapping[str, Any] | None,
    served: frozenset[str] | None,
) -> str | None:
    """Why a READY task has not started, when it is known; None otherwise."""
    if state != TaskState.READY or served is None:
        return None
    return None if dispatched_as(task_type, binding) in served else not_served(task_type)


@dataclass
class ServedTypes:
    """The types live workers serve, read from their records at most once per ``fresh_for``."""

    fetch_workers: Callable[[], Sequence[Mapping[str, Any]]]
    fresh_for: timedelta = FRESH_FOR
    clock: Callable[[], float] = time.monotonic
    _types: frozenset[str] | None = None
    _read_at: float = float("-inf")
    _reading: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self) -> frozenset[str] | None:
        """The served types; None when Redis cannot say (no warning is better than a 500)."""
        now = self.clock()
        if self._fresh(now):
            return self._types
        if not self._reading.acquire(blocking=False):
            return self._types  # another request is reading them: what was read will do
        try:
            return self._read(now)
        finally:
            self._reading.release()

    def would_read(self) -> bool:
        """Whether a call now would read Redis.

        Only when what was read is stale and no other call is reading it: while one
        reads, the others answer with the last reading.
        """
        return not self._fresh(self.clock()) and not self._reading.locked()

    def _fresh(self, now: float) -> bool:
        return now - self._read_at < self.fresh_for.total_seconds()

    def _read(self, now: float) -> frozenset[str] | None:
        try:
            workers = self.fetch_workers()
        except redis.RedisError:
            return None
        self._types = frozenset(t for worker in workers for t in worker_types(worker))
        self._read_at = now
        return self._types
