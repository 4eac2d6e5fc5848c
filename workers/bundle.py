"""Running a bundle: its attempts one after another, the rest shared when it is slow.

A bundle (``common.messaging.bundling``) is taken by one pool thread, which claims all
its attempts at once: a worker killed halfway leaves them claimed by a dead worker,
which the beat requeues, instead of unclaimed in a message only a broker visibility
timeout (hours) would give back. Short attempts are why bundles exist, and for them
running in order is the fastest there is. A bundle whose attempts turn out slow must
not keep the others waiting behind the first, so ``spill_after`` after the thread took
it, the watchdog hands every attempt not yet begun back to the queue as a single
dispatch, its claim dropped in the same Redis call, where idle threads and other
workers pick them up. An attempt is never both run here and handed back: the thread
and the watchdog take items from the same queue under one lock.

A lane (``TaskBundle.lane``: attempts that share one flow slot) must not run side by
side, so a slow one's rest goes back to the engine instead (a ``redeliver`` for each,
claims dropped in the same call), where it waits for a slot again: a lane of slow
attempts would otherwise hold a backlog behind it that a more urgent task cannot pass.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable

from common.messaging.holdings import Holdings
from common.messaging.messages import TaskDispatch
from common.messaging.publisher import Outgoing, Sink

logger = logging.getLogger(__name__)


class BundleItems:
    """The claimed attempts of one bundle not yet begun; the watchdog may spill them."""

    def __init__(
        self, queue: str, dispatches: list[TaskDispatch], holdings: Holdings, worker: str, *,
        lane: bool = False,
    ) -> None:
        self._queue = queue
        self._lane = lane
        self._pending = deque(dispatches)
        self._holdings = holdings
        self._worker = worker
        self._lock = threading.Lock()

    def take(self, count: int) -> list[TaskDispatch]:
        """Up to ``count`` attempts to run here; an empty list when none is left."""
        with self._lock:
            return [self._pending.popleft() for _ in range(min(count, len(self._pending)))]

    def wake(self, generation: int) -> None:
        """Spill: hand back what has not begun, as single dispatches, claims dropped.

        The lock is held while handing back, so the running thread cannot take an item
        that is on its way back to the queue; if Redis refuses, the items stay here,
        still claimed, and this thread runs them after all.
        """
        with self._lock:
            if not self._pending:
                return
            spilled = list(self._pending)
            if self._lane:
                self._holdings.give_back(spilled, self._worker)
            else:
                self._holdings.hand_back(self._queue, spilled, self._worker)
            self._pending.clear()
        logger.info("%s on %s slow: %d attempts handed back%s", "lane" if self._lane else
                    "bundle", self._queue, len(spilled), " to the engine" if self._lane else "")


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
