"""Result messages of the connector's attempts, sent in order, many per round trip.

The protocol is the workers' (``workers.reporting``): ``started`` once an attempt has
run for 0.2 s, ``heartbeat`` every heartbeat interval after that, ``finished`` at the
end; a short attempt sends only ``finished``. With hundreds of calls in flight on one
event loop, every message is handed to one :class:`ResultSender`, which publishes
what has queued up in one pipelined push from a thread, in the order it was handed
over, so an attempt's ``started`` never overtakes its ``finished``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import redis

from common.messaging.messages import (
    RESULT_TASK,
    RESULTS_QUEUE,
    LogLine,
    Outcome,
    ResultKind,
    TaskDispatch,
    TaskResult,
    utcnow,
)
from common.messaging.publisher import Outgoing, Sink
from common.outage import Outage

logger = logging.getLogger(__name__)


def result_message(result: TaskResult) -> Outgoing:
    """The ``stellwerk.result`` message of ``result`` (the connector's output is JSON)."""
    return Outgoing(RESULTS_QUEUE, RESULT_TASK, result.model_dump(mode="json"),
                    str(result.message_id))


class AttemptReporter:
    """Builds the result messages of one attempt, in the order the engine expects."""

    def __init__(
        self, dispatch: TaskDispatch, worker: str, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._dispatch = dispatch
        self._worker = worker
        self._clock = clock
        self._started_at = clock()
        self._started_sent = False

    def progress(self, *, detached: bool = False, log: Iterable[str] = ()) -> Outgoing:
        """``started`` the first time, ``heartbeat`` afterwards.

        ``detached``: someone else completes the attempt (a web-service worker that
        answered 201); the engine then holds it until its timeout, not this lease.
        """
        kind: ResultKind = "heartbeat" if self._started_sent else "started"
        self._started_sent = True
        return result_message(self._result(kind, log, detached=detached))

    def finished(
        self, outcome: Outcome, *, message: str = "", output: dict[str, Any] | None = None,
        log: Iterable[str] = (),
    ) -> Outgoing:
        """The attempt's outcome."""
        return result_message(
            self._result("finished", log, outcome=outcome, message=message, output=output)
        )

    def _result(self, kind: ResultKind, log: Iterable[str], **fields: Any) -> TaskResult:
        now = self._clock()
        return TaskResult(
            task_run_id=self._dispatch.task_run_id,
            run_id=self._dispatch.run_id,
            attempt=self._dispatch.attempt,
            kind=kind,
            worker=self._worker,
            started_at=self._started_at,
            at=now,
            logs=[LogLine(at=now, stream="log", line=line) for line in log],
            **fields,
        )


class ResultSender:
    """Publishes handed-over messages in order; what queues up meanwhile goes together.

    A Redis error keeps the messages and tries again after ``retry_after`` at most
    (capped backoff, the outage logged once): a result must not be lost because Redis
    was away.
    """

    def __init__(
        self, publisher: Sink, *, retry_after: timedelta = timedelta(seconds=1)
    ) -> None:
        self._publisher = publisher
        self._pending: list[Outgoing] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.redis = Outage("Redis", logger, max_wait=retry_after)

    def send(self, messages: Iterable[Outgoing]) -> None:
        """Queue ``messages`` for publishing (returns at once)."""
        before = len(self._pending)
        self._pending.extend(messages)
        if len(self._pending) > before:
            self._idle.clear()
            self._wake.set()

    async def run(self) -> None:
        """Publish until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            try:
                await asyncio.to_thread(self._publisher.publish, batch)
            except redis.RedisError as error:
                self._pending[:0] = batch
                await asyncio.sleep(self.redis.failed(error))
                self._wake.set()
                continue
            self.redis.succeeded()
            if not self._pending:
                self._idle.set()

    async def flush(self) -> None:
        """Wait until everything handed over so far is published."""
        await self._idle.wait()
