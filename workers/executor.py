"""Running one dispatched attempt: claim it, run its processor, report the outcome.

Free of Celery: the runtime hands each message's payload to :meth:`Executor.handle`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID

import redis
from pydantic import BaseModel, ValidationError

from common.messaging.keys import CLAIM_TTL, cancel_key, claim_key
from common.messaging.messages import TaskDispatch, TaskResult, utcnow
from common.messaging.publisher import Publisher
from workers.context import TaskContext, attempt_label
from workers.heartbeat import Heartbeat, Watchdog
from workers.invoke import invoke
from workers.outcomes import Accepted, Completed, Failed, Outcome, Rejected
from workers.registry import Registry, UnknownTaskTypeError
from workers.reporting import ResultReporter, result_message
from workers.tasklog import TaskLog

logger = logging.getLogger(__name__)


# Claim and cancel check in one call: a pipeline object costs more CPU to build in
# redis-py than the round trip it saves.
CLAIM_SCRIPT = """
local claimed = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) and 1 or 0
return {claimed, redis.call('EXISTS', KEYS[2])}
"""


class _AttemptIds(BaseModel):
    """Just enough of a malformed dispatch to reject it back to the engine."""

    task_run_id: UUID
    run_id: UUID
    attempt: int


class Executor:
    """Runs the attempts a worker receives; one instance serves all its threads."""

    def __init__(
        self,
        registry: Registry,
        client: redis.Redis,
        publisher: Publisher,
        heartbeat_interval: timedelta,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._registry = registry
        self._redis = client
        self._publisher = publisher
        self._interval_s = heartbeat_interval.total_seconds()
        self._clock = clock
        self._watchdog = Watchdog()
        self._claim_script = client.register_script(CLAIM_SCRIPT)

    def handle(self, payload: object, worker: str) -> None:
        """Run the attempt ``payload`` describes, at most once per idempotency key."""
        try:
            dispatch = TaskDispatch.model_validate(payload)
        except ValidationError as exc:
            self._reject_malformed(payload, exc, worker)
            return
        if not self._claim(dispatch, worker):
            return
        try:
            processor = self._registry.get(dispatch.type)
        except UnknownTaskTypeError as exc:
            self._reject(dispatch, worker, f"{exc} on worker {worker}")
            return
        ctx = TaskContext.from_dispatch(dispatch, clock=self._clock)
        reporter = ResultReporter(self._publisher, dispatch, worker, started_at=self._clock())
        cancel_requested = self._cancel_probe(dispatch.idempotency_key)
        with Heartbeat(
            ctx, reporter, cancel_requested, interval_s=self._interval_s, watchdog=self._watchdog
        ) as beat:
            outcome = invoke(processor, ctx)
        _report(reporter, ctx, outcome, timed_out=beat.timed_out)

    def _claim(self, dispatch: TaskDispatch, worker: str) -> bool:
        """Whether this worker may run the attempt: first to claim it, not cancelled.

        A relay may deliver a dispatch twice, and the broker redelivers a message whose
        worker died; either way the attempt must not run again. The engine requeues a
        lost attempt under a new attempt number, which is a new key.
        """
        key = dispatch.idempotency_key
        ttl_s = int(CLAIM_TTL.total_seconds())
        claimed, cancelled = self._claim_script(
            keys=[claim_key(key), cancel_key(key)], args=[worker, ttl_s]
        )
        label = attempt_label(dispatch.run_id, dispatch.task, dispatch.attempt)
        if not claimed:
            logger.info("%s: already claimed (%s), skipped", label, key)
            return False
        if cancelled:
            logger.info("%s: cancelled before it started (%s), skipped", label, key)
            return False
        return True

    def _cancel_probe(self, idempotency_key: str) -> Callable[[], bool]:
        key = cancel_key(idempotency_key)
        return lambda: bool(self._redis.exists(key))

    def _reject(self, dispatch: TaskDispatch, worker: str, message: str) -> None:
        label = attempt_label(dispatch.run_id, dispatch.task, dispatch.attempt)
        logger.error("%s: rejected: %s", label, message)
        reporter = ResultReporter(self._publisher, dispatch, worker, started_at=self._clock())
        reporter.finished(TaskLog(), "REJECTED", message=message)

    def _reject_malformed(self, payload: object, error: ValidationError, worker: str) -> None:
        """Answer a dispatch that does not parse with REJECTED, if it names its attempt."""
        message = f"invalid task dispatch: {error}"
        try:
            ids = _AttemptIds.model_validate(payload)
        except ValidationError:
            logger.error("dropped a message that is no task dispatch: %s", message)
            return
        logger.error("run %s: %s", ids.run_id, message)
        result = TaskResult(
            **ids.model_dump(), kind="finished", outcome="REJECTED", message=message, worker=worker
        )
        self._publisher.publish([result_message(result)])


def _report(reporter: ResultReporter, ctx: TaskContext, outcome: Outcome, timed_out: bool) -> None:
    """The ``finished`` message of an attempt; nothing for one accepted for a post-back."""
    storage = ctx.saved_storage
    if timed_out:
        output = outcome.output if isinstance(outcome, Completed | Failed) else None
        message = f"timed out after {ctx.timeout_s:g} s"
        reporter.finished(ctx.logs, "TIMEOUT", message=message, output=output, storage=storage)
    elif isinstance(outcome, Completed):
        reporter.finished(ctx.logs, "COMPLETED", output=outcome.output, storage=storage)
    elif isinstance(outcome, Failed):
        reporter.finished(
            ctx.logs, "FAILED", message=outcome.message, output=outcome.output, storage=storage
        )
    elif isinstance(outcome, Rejected):
        reporter.finished(ctx.logs, "REJECTED", message=outcome.message, storage=storage)
    elif isinstance(outcome, Accepted):
        logger.info("%s: accepted for completion by post-back", ctx.label)
