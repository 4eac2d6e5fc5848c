"""Running a bundle: its attempts one after another, the rest shared when it is slow.

A bundle (``common.messaging.bundling``) is taken by one pool thread. Short attempts
are why bundles exist, and for them running in order is the fastest there is. A
bundle whose attempts turn out slow must not keep the others waiting behind the
first, so ``spill_after`` after the thread took it, the watchdog hands every attempt
not yet begun back to the queue as a single dispatch, where idle threads and other
workers pick them up. An attempt is never both run here and handed back: the thread
and the watchdog take items from the same queue under one lock, and the worker's
claim would stop a second run anyway.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from common.messaging.messages import EXECUTE_TASK
from common.messaging.publisher import Outgoing, Sink

logger = logging.getLogger(__name__)


class BundleItems:
    """The attempts of one bundle not yet begun; the watchdog may spill them."""

    def __init__(self, queue: str, dispatches: list[dict[str, Any]], publisher: Sink) -> None:
        self._queue = queue
        self._pending = deque(dispatches)
        self._publisher = publisher
        self._lock = threading.Lock()

    def take(self, count: int) -> list[object]:
        """Up to ``count`` attempts to run here; an empty list when none is left."""
        with self._lock:
            return [self._pending.popleft() for _ in range(min(count, len(self._pending)))]

    def wake(self, generation: int) -> None:
        """Spill: publish what has not begun as single dispatches.

        The lock is held while publishing, so the running thread cannot take an item
        that is on its way back to the queue; if Redis refuses, the items stay here
        and this thread runs them after all.
        """
        with self._lock:
            if not self._pending:
                return
            spilled = [_single(self._queue, item) for item in self._pending]
            self._publisher.publish(spilled)
            self._pending.clear()
        logger.info("bundle on %s slow: %d attempts handed back", self._queue, len(spilled))


def _single(queue: str, dispatch: dict[str, Any]) -> Outgoing:
    """A ``stellwerk.execute`` message, with the attempt's key as its Celery id."""
    task_id = None
    if isinstance(dispatch, dict) and {"task_run_id", "attempt"} <= dispatch.keys():
        task_id = f"{dispatch['task_run_id']}:{dispatch['attempt']}"
    return Outgoing(queue, EXECUTE_TASK, dispatch, task_id)


class ResultBuffer:
    """Outcomes of a chunk of attempts, kept to be sent in one round trip."""

    def __init__(self) -> None:
        self._messages: list[Outgoing] = []

    def publish(self, messages: Iterable[Outgoing]) -> int:
        """Keep ``messages`` for :meth:`flush`."""
        before = len(self._messages)
        self._messages.extend(messages)
        return len(self._messages) - before

    def flush(self, publisher: Sink) -> None:
        """Send what has been kept, in order."""
        if self._messages:
            publisher.publish(self._messages)
            self._messages = []
