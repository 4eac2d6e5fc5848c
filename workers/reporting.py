"""Posting an attempt's results back to ``stellwerk.results``.

The first message about an attempt is always ``started`` (the engine moves the task to
ACTIVE and starts its lease), later ones ``heartbeat``, the last ``finished``. A short
task sends only ``finished``; a task whose log does not fit in one message sends the
overflow ahead of ``finished`` as ``started``/``heartbeat`` chunks, so nothing is lost
and no broker message grows without bound.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic_core import PydanticSerializationError

from common.messaging.messages import (
    RESULT_TASK,
    RESULTS_QUEUE,
    LogLine,
    ResultKind,
    TaskDispatch,
    TaskResult,
)
from common.messaging.messages import Outcome as ResultOutcome
from common.messaging.publisher import Outgoing, Sink
from workers.tasklog import TaskLog

logger = logging.getLogger(__name__)


class ResultReporter:
    """Sends the result messages of one attempt, in the order the engine expects.

    ``started`` and heartbeats go out at once; ``finished`` goes to ``outcomes``, which
    a bundle points at a buffer so that a chunk of short attempts reports in one call.
    """

    def __init__(
        self,
        publisher: Sink,
        dispatch: TaskDispatch,
        worker: str,
        started_at: datetime,
        outcomes: Sink | None = None,
    ) -> None:
        self._publisher = publisher
        self._outcomes = outcomes or publisher
        self._dispatch = dispatch
        self._worker = worker
        self._started_at = started_at
        self._started_sent = False

    @property
    def started_sent(self) -> bool:
        """Whether the engine has been told that the attempt runs."""
        return self._started_sent

    def progress(self, logs: list[LogLine]) -> None:
        """``started`` the first time, ``heartbeat`` afterwards: the attempt is alive."""
        self._send(self._progress_result(logs))

    def finished(
        self,
        log: TaskLog,
        outcome: ResultOutcome,
        *,
        message: str = "",
        output: dict[str, Any] | None = None,
        storage: dict[str, Any] | None = None,
    ) -> None:
        """Flush the log and report the attempt's outcome."""
        chunk = log.drain()
        while log.has_pending():
            self.progress(chunk)
            chunk = log.drain()
        result = self._result(
            "finished", chunk, outcome=outcome, message=message, output=output, storage=storage
        )
        self._outcomes.publish([result_message(result)])

    def detached(self, log: TaskLog, *, storage: dict[str, Any] | None = None) -> None:
        """Flush the log and hand the attempt over: someone else reports its outcome.

        ``started`` or ``heartbeat`` with ``detached``: the engine then holds the attempt
        by its timeout (renewed by post-back callbacks) instead of this worker's lease.
        """
        chunk = log.drain()
        while log.has_pending():
            self.progress(chunk)
            chunk = log.drain()
        result = self._progress_result(chunk)
        self._send(result.model_copy(update={"detached": True, "storage": storage}))

    def _progress_result(self, logs: list[LogLine]) -> TaskResult:
        kind: ResultKind = "heartbeat" if self._started_sent else "started"
        self._started_sent = True
        return self._result(kind, logs)

    def _result(self, kind: ResultKind, logs: list[LogLine], **fields: Any) -> TaskResult:
        return TaskResult(
            task_run_id=self._dispatch.task_run_id,
            run_id=self._dispatch.run_id,
            attempt=self._dispatch.attempt,
            kind=kind,
            worker=self._worker,
            started_at=self._started_at,
            logs=logs,
            **fields,
        )

    def _send(self, result: TaskResult) -> None:
        self._publisher.publish([result_message(result)])


def result_message(result: TaskResult) -> Outgoing:
    """The message of ``result``; output or storage that is not JSON becomes a failure.

    Checked here rather than trusted: a processor may return any dict, and a payload
    the broker cannot serialise would lose the result altogether.
    """
    try:
        payload = result.model_dump(mode="json")
    except PydanticSerializationError as exc:
        logger.warning("result of %s is not JSON: %s", result.task_run_id, exc)
        payload = result.model_copy(
            update={
                "outcome": "FAILED",
                "output": None,
                "storage": None,
                "message": f"the task's output or storage is not JSON-serialisable: {exc}",
            }
        ).model_dump(mode="json")
    return Outgoing(RESULTS_QUEUE, RESULT_TASK, payload, str(result.message_id))
