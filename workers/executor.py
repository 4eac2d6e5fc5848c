"""Running one dispatched attempt: claim it, run its processor, report the outcome.

Free of Celery: the runtime hands each message's payload to :meth:`Executor.handle`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal
from uuid import UUID

import redis
from pydantic import BaseModel, ValidationError

from common.messaging.holdings import Holdings
from common.messaging.keys import cancel_key
from common.messaging.messages import TaskBundle, TaskDispatch, TaskResult, utcnow
from common.messaging.publisher import Publisher, Sink
from common.secure_params import SecretBox, SecretKeyError
from common.tracing import span, task_attributes, tracing_on
from workers.bundle import BundleItems, ResultBuffer
from workers.context import TaskContext, attempt_label
from workers.heartbeat import Heartbeat, Watchdog
from workers.invoke import invoke
from workers.outcomes import Accepted, Completed, Failed, Outcome, Rejected
from workers.registry import Registry, UnknownTaskTypeError
from workers.reporting import ResultReporter, result_message
from workers.tasklog import TaskLog

logger = logging.getLogger(__name__)


# A bundle's attempts are taken in chunks that double while they run fast (up to
# MAX_CHUNK) and fall back to one when a chunk takes longer than FAST_CHUNK_S: fast
# attempts share the round trip of their outcomes, slow ones stay behind for the spill.
MAX_CHUNK = 16
FAST_CHUNK_S = 0.01
# An attempt claimed longer ago than this is asked about before it begins: its worker
# may have been stopped (SIGSTOP, a VM pause) past its liveness, and the attempt given
# to another (the engine then sets its cancel flag). Far above a fast bundle's pace,
# far below the 6 s after which a silent worker is judged lost.
STALE_CLAIM_S = 2.0


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
        *,
        clock: Callable[[], datetime] = utcnow,
        spill_after: timedelta = timedelta(milliseconds=200),
        secrets: SecretBox | None = None,
        holdings: Holdings | None = None,
    ) -> None:
        """``holdings`` keeps claims and outcomes for Redis to lose (one per worker)."""
        self._registry = registry
        self._secrets = secrets or SecretBox(None)
        self._redis = client
        self._holdings = holdings or Holdings(client, publisher)
        self._publisher: Sink = self._holdings
        self._interval_s = heartbeat_interval.total_seconds()
        self._clock = clock
        self._watchdog = Watchdog()
        self._spill_after_s = spill_after.total_seconds()

    def handle(self, payload: object, worker: str) -> None:
        """Run the attempt ``payload`` describes, at most once per idempotency key.

        As for a bundle's attempts, one claimed longer ago than :data:`STALE_CLAIM_S`
        (the worker stopped during or after its claim) is asked about before it begins.
        """
        dispatch = self._parse(payload, worker)
        if dispatch is None:
            return
        asked_at = time.monotonic()
        if not self._holdings.claim([dispatch], worker)[0]:
            return
        if time.monotonic() - asked_at > STALE_CLAIM_S and not self._not_given_up([dispatch]):
            return
        self._run(dispatch, worker, self._publisher)

    def handle_bundle(self, payload: object, worker: str) -> None:
        """Run a bundle's attempts in order; after ``spill_after`` share what is left.

        A lane's rest (``TaskBundle.lane``: its attempts hold one flow slot) goes back to
        the engine, not to the queue (``workers.bundle``).
        """
        try:
            bundle = TaskBundle.model_validate(payload)
        except ValidationError as exc:
            logger.error("dropped a bundle that does not parse: %s", exc)
            return
        parsed = (self._parse(payload, worker) for payload in bundle.dispatches)
        dispatches = [dispatch for dispatch in parsed if dispatch is not None]
        claimed_at = time.monotonic()  # before the claim: a stop during it counts
        allowed = self._holdings.claim(dispatches, worker)
        mine = [dispatch for dispatch, won in zip(dispatches, allowed, strict=True) if won]
        items = BundleItems(bundle.queue, mine, self._holdings, worker, lane=bundle.lane)
        self._watchdog.schedule(claimed_at + self._spill_after_s, items, 0)
        size = 1
        while chunk := items.take(size):
            began = time.monotonic()
            if began - claimed_at > STALE_CLAIM_S:
                chunk = self._not_given_up(chunk)
            self._run_chunk(chunk, worker)
            fast = time.monotonic() - began < FAST_CHUNK_S
            size = min(2 * size, MAX_CHUNK) if fast else 1

    def _not_given_up(self, dispatches: list[TaskDispatch]) -> list[TaskDispatch]:
        """Those of ``dispatches`` whose cancel flag is not set (one Redis call).

        The others were given to another worker while this one could not answer; they
        are dropped here, still claimed, so that nobody runs them again.
        """
        flags = self._redis.mget([cancel_key(d.idempotency_key) for d in dispatches])
        keep = []
        for dispatch, flag in zip(dispatches, flags, strict=True):
            if flag is None:
                keep.append(dispatch)
                continue
            label = attempt_label(dispatch.run_id, dispatch.task, dispatch.attempt)
            logger.warning("%s: given up while this worker could not answer; not begun",
                           label)
            self._holdings.release(dispatch.idempotency_key)
        return keep

    def _run_chunk(self, dispatches: list[TaskDispatch], worker: str) -> None:
        """Run claimed attempts; send their outcomes in one call."""
        outcomes = ResultBuffer()
        for dispatch in dispatches:
            self._run(dispatch, worker, outcomes)
        outcomes.flush(self._publisher)

    def _parse(self, payload: object, worker: str) -> TaskDispatch | None:
        try:
            return TaskDispatch.model_validate(payload)
        except ValidationError as exc:
            self._reject_malformed(payload, exc, worker)
            return None

    def _run(self, dispatch: TaskDispatch, worker: str, outcomes: Sink) -> None:
        """Run a claimed attempt; its ``finished`` message goes to ``outcomes``.

        With tracing on, the attempt is a span in its run's trace (``stellwerk.task``).
        """
        try:
            attributes = task_attributes(dispatch, worker) if tracing_on() else None
            with span("stellwerk.task", dispatch.traceparent, attributes):
                self._run_claimed(dispatch, worker, outcomes)
        finally:
            self._holdings.release(dispatch.idempotency_key)

    def _run_claimed(self, dispatch: TaskDispatch, worker: str, outcomes: Sink) -> None:
        try:
            processor = self._registry.get(dispatch.type)
        except UnknownTaskTypeError as exc:
            self._reject(dispatch, worker, f"{exc} on worker {worker}", outcomes)
            return
        try:
            dispatch = open_secrets(dispatch, self._secrets)
        except SecretKeyError as exc:
            # Another worker (or this one, restarted with the right key) may run it.
            self._reject(dispatch, worker, f"{exc} (worker {worker})", outcomes, "FAILED")
            return
        ctx = TaskContext.from_dispatch(dispatch, clock=self._clock)
        self._holdings.running(dispatch.idempotency_key, ctx.cancel)
        reporter = ResultReporter(
            self._publisher, dispatch, worker, started_at=self._clock(), outcomes=outcomes
        )
        cancel_requested = self._cancel_probe(dispatch.idempotency_key)
        with Heartbeat(
            ctx, reporter, cancel_requested, interval_s=self._interval_s, watchdog=self._watchdog
        ) as beat:
            outcome = invoke(processor, ctx)
        _report(reporter, ctx, _masked(outcome, ctx.logs), timed_out=beat.timed_out)

    def _cancel_probe(self, idempotency_key: str) -> Callable[[], bool]:
        key = cancel_key(idempotency_key)
        return lambda: bool(self._redis.exists(key))

    def _reject(
        self, dispatch: TaskDispatch, worker: str, message: str, outcomes: Sink,
        outcome: Literal["REJECTED", "FAILED"] = "REJECTED",
    ) -> None:
        """End an attempt that this worker cannot run without running it."""
        label = attempt_label(dispatch.run_id, dispatch.task, dispatch.attempt)
        logger.error("%s: %s: %s", label, outcome.lower(), message)
        reporter = ResultReporter(
            self._publisher, dispatch, worker, started_at=self._clock(), outcomes=outcomes
        )
        reporter.finished(TaskLog(), outcome, message=message)

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


def open_secrets(dispatch: TaskDispatch, secrets: SecretBox) -> TaskDispatch:
    """The dispatch with its sealed secure params opened (only ever in this process)."""
    sealed, sealed_job = dispatch.sealed_secure_params, dispatch.sealed_job_secure_params
    if sealed is None and sealed_job is None:
        return dispatch
    return dispatch.model_copy(update={
        "secure_params": dispatch.secure_params if sealed is None else secrets.open(sealed),
        "job_secure_params": (
            dispatch.job_secure_params if sealed_job is None else secrets.open(sealed_job)
        ),
        "sealed_secure_params": None, "sealed_job_secure_params": None,
    })


def _masked(outcome: Outcome, logs: TaskLog) -> Outcome:
    """The outcome with secure values masked in its message and output, as in its log."""
    if isinstance(outcome, Completed):
        return Completed(logs.mask_value(outcome.output))
    if isinstance(outcome, Failed):
        return Failed(logs.mask(outcome.message), logs.mask_value(outcome.output))
    if isinstance(outcome, Rejected):
        return Rejected(logs.mask(outcome.message))
    return outcome


def _report(reporter: ResultReporter, ctx: TaskContext, outcome: Outcome, timed_out: bool) -> None:
    """The ``finished`` message of an attempt; a detached one for one accepted for a post-back."""
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
        # Detached: the engine holds the attempt by its timeout, not this worker's lease,
        # which ends now (without this it expired and the task was requeued).
        reporter.detached(ctx.logs, storage=storage)
        logger.info("%s: accepted for completion by post-back", ctx.label)
