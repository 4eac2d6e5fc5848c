"""Running one claimed attempt: its processor under a deadline, watched, then reported.

An attempt waits for one of the connector's slots (``--concurrency``), then runs its
type's processor as a task of its own while the monitor reports it. Three things end
it: the processor's answer; the cancel flag (the call is aborted and the attempt
reported FAILED, as a worker's cancelled processor is; the engine makes it CANCELED
when a cancel asked for it); or the task's ``timeout_s`` (TIMEOUT).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from common.messaging.holdings import Holdings
from common.messaging.messages import TaskDispatch, utcnow
from common.tracing import span, task_attributes, tracing_on
from connectors.endings import Ending, Finished, HandedOver
from connectors.monitor import Monitor, Watch
from connectors.results import AttemptReporter, ResultSender

logger = logging.getLogger(__name__)

Processor = Callable[[TaskDispatch], Awaitable[Ending]]


class AttemptRunner:
    """Runs attempts with the processors of the types this connector serves."""

    def __init__(
        self,
        processors: Mapping[str, Processor],
        monitor: Monitor,
        sender: ResultSender,
        slots: asyncio.Semaphore,
        worker: str,
        *,
        clock: Callable[[], datetime] = utcnow,
        holdings: Holdings | None = None,
    ) -> None:
        """``holdings`` learns which attempts run, to stop one another worker took."""
        self._holdings = holdings
        self._processors = processors
        self._monitor = monitor
        self._sender = sender
        self._slots = slots
        self._worker = worker
        self._clock = clock

    async def run(self, dispatch: TaskDispatch) -> None:
        """Run one claimed attempt and report how it ended."""
        processor = self._processors.get(dispatch.type)
        if processor is None:
            reporter = AttemptReporter(dispatch, self._worker, clock=self._clock)
            message = f"task type {dispatch.type!r} is not served by connector {self._worker}"
            self._sender.send([reporter.finished("REJECTED", message=message)])
            return
        async with self._slots:
            reporter = AttemptReporter(dispatch, self._worker, clock=self._clock)
            watch = self._monitor.watch(dispatch.idempotency_key, reporter)
            self._hold(dispatch.idempotency_key, watch)
            try:
                attributes = task_attributes(dispatch, self._worker) if tracing_on() else None
                with span("stellwerk.task", dispatch.traceparent, attributes):
                    ending = await _supervised(processor(dispatch), watch, dispatch)
            finally:
                self._monitor.unwatch(watch)
                if self._holdings is not None:
                    self._holdings.release(dispatch.idempotency_key)
        if isinstance(ending, HandedOver):
            self._sender.send([reporter.progress(detached=True, log=ending.log)])
            return
        self._sender.send([reporter.finished(
            ending.outcome, message=ending.message, output=ending.output, log=ending.log
        )])


    def _hold(self, key: str, watch: Watch) -> None:
        if self._holdings is not None:
            loop = asyncio.get_running_loop()

            def cancel() -> None:  # called on the liveness beacon's thread
                loop.call_soon_threadsafe(watch.cancelled.set)

            self._holdings.running(key, cancel)


async def _supervised(
    work: Awaitable[Ending], watch: Watch, dispatch: TaskDispatch
) -> Ending:
    """``work``'s ending, unless the cancel flag or the deadline comes first."""
    call = asyncio.ensure_future(work)
    cancelled = asyncio.ensure_future(watch.cancelled.wait())
    try:
        await asyncio.wait(
            {call, cancelled}, timeout=dispatch.timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        cancelled.cancel()
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
    label = f"run {dispatch.run_id} task {dispatch.task!r} attempt {dispatch.attempt}"
    if call.cancelled():
        if watch.cancelled.is_set():
            return Finished("FAILED", "canceled while the call ran", log=("[stellwerk] canceled",))
        message = f"timed out after {dispatch.timeout_s:g} s"
        return Finished("TIMEOUT", message, log=(f"[stellwerk] {message}",))
    try:
        return call.result()
    except Exception as error:  # a bug in a processor fails its task, not the connector
        logger.exception("%s: processor failed", label)
        return Finished("FAILED", f"connector error: {type(error).__name__}: {error}")
