"""From a broker message to running attempts: parse, claim, ack, start.

Runs on the event loop. A ``stellwerk.execute`` message carries one dispatch, a
``stellwerk.execute_bundle`` several (``common.messaging.bundling``); the connector
runs all of a bundle's attempts at once, so it claims them together, in one Redis
call, and acks the message only then. A dispatch that does not parse is answered
REJECTED when it names its attempt, as the worker does; one that cannot be claimed
(Redis away) goes back to its queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any
from uuid import UUID

import redis
from pydantic import BaseModel, ValidationError

from common.messaging.holdings import Holdings
from common.messaging.messages import (
    EXECUTE_BUNDLE_TASK,
    EXECUTE_TASK,
    TaskBundle,
    TaskDispatch,
    TaskResult,
)
from common.messaging.publisher import Outgoing
from connectors.attempts import AttemptRunner
from connectors.consumer import Delivery
from connectors.results import ResultSender, result_message

logger = logging.getLogger(__name__)


class _AttemptIds(BaseModel):
    """Just enough of a malformed dispatch to reject it back to the engine."""

    task_run_id: UUID
    run_id: UUID
    attempt: int


class Intake:
    """Turns deliveries into claimed attempts running on the loop."""

    def __init__(
        self, holdings: Holdings, runner: AttemptRunner, sender: ResultSender, worker: str,
        release: Callable[[int], None],
    ) -> None:
        """``holdings`` claims the attempts and remembers them (for Redis to lose)."""
        self._holdings = holdings
        self._runner = runner
        self._sender = sender
        self._worker = worker
        self._release = release
        self._running: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        """Deliveries and attempts being handled now."""
        return len(self._running)

    def accept(self, delivery: Delivery) -> None:
        """Handle ``delivery`` on the loop (call on the loop's thread)."""
        self._spawn(self._take(delivery), 0)

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for every attempt to finish; whether they did."""
        if self._running:
            _, pending = await asyncio.wait(set(self._running), timeout=timeout_s)
            return not pending
        return True

    async def _take(self, delivery: Delivery) -> None:
        dispatches = self._dispatches(delivery)
        self._release(delivery.attempts - len(dispatches))
        try:
            allowed = await asyncio.to_thread(self._holdings.claim, dispatches, self._worker)
        except redis.RedisError as error:
            logger.warning("could not claim %d attempts (%s): requeued", len(dispatches), error)
            self._release(len(dispatches))
            delivery.settle(False)
            return
        delivery.settle(True)
        for dispatch, claimed in zip(dispatches, allowed, strict=True):
            if claimed:
                self._spawn(self._runner.run(dispatch), 1)
            else:
                self._release(1)

    def _spawn(self, work: Coroutine[Any, Any, None], releases: int) -> None:
        """Run ``work`` as a task kept until it ends; then release ``releases`` attempts."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._running.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._running.discard(finished)
            self._release(releases)

        task.add_done_callback(done)

    def _dispatches(self, delivery: Delivery) -> list[TaskDispatch]:
        """The well-formed dispatches of a delivery; the others are answered or dropped."""
        if delivery.task_name == EXECUTE_TASK:
            payloads = [delivery.payload]
        elif delivery.task_name == EXECUTE_BUNDLE_TASK:
            try:
                payloads = list(TaskBundle.model_validate(delivery.payload).dispatches)
            except ValidationError as error:
                logger.error("dropped a bundle that does not parse: %s", error)
                return []
        else:
            logger.error("dropped a message of unknown task %r", delivery.task_name)
            return []
        parsed = []
        for payload in payloads:
            try:
                parsed.append(TaskDispatch.model_validate(payload))
            except ValidationError as error:
                self._sender.send(_rejection(payload, error, self._worker))
        return parsed


def _rejection(payload: object, error: ValidationError, worker: str) -> list[Outgoing]:
    """REJECTED for a dispatch that does not parse, if it names its attempt."""
    message = f"invalid task dispatch: {error}"
    try:
        ids = _AttemptIds.model_validate(payload)
    except ValidationError:
        logger.error("dropped a message that is no task dispatch: %s", message)
        return []
    logger.error("run %s: %s", ids.run_id, message)
    result = TaskResult(
        **ids.model_dump(), kind="finished", outcome="REJECTED", message=message, worker=worker
    )
    return [result_message(result)]
