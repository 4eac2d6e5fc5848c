"""Decoding engine input: the messages on the activation and results queues."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from common.domain import events as ev
from common.domain.states import TaskState
from common.messaging.messages import ACTIVATE_TASK, RESULT_TASK, Activation, TaskResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Incoming:
    """One decoded message: an activation or a task result."""

    message_id: uuid.UUID
    run_id: uuid.UUID
    body: Activation | TaskResult


def decode(task_name: str | None, payload: Any) -> Incoming | None:
    """Validate the single argument of an activation or result message; None if unusable."""
    try:
        if task_name == ACTIVATE_TASK:
            model: Activation | TaskResult = Activation.model_validate(payload)
        elif task_name == RESULT_TASK:
            model = TaskResult.model_validate(payload)
        else:
            log.warning("dropping a message for unknown task %r", task_name)
            return None
    except ValidationError as error:
        log.warning("dropping a malformed %s message: %s", task_name, error)
        return None
    return Incoming(model.message_id, model.run_id, model)


# The run-level signals, and the attempt-level ones (which name a task and attempt).
_RUN_SIGNALS: dict[str, Callable[[], ev.Event]] = {
    "start": ev.StartRun,
    "cancel_grace_over": ev.CancelGraceOver,
    "run_timeout": ev.RunTimedOut,
    "cancel": ev.CancelRun,
    "suspend": lambda: ev.PauseRun(reason="suspended"),
    "auto_resume": lambda: ev.ResumeRun(reason="auto-resumed after suspension"),
    "reconcile": ev.Reconcile,
}
_ATTEMPT_SIGNALS: dict[str, Callable[[str, int], ev.Event]] = {
    "retry_due": ev.RetryDue,
    "lease_expired": ev.LeaseExpired,
    "task_timeout": ev.TaskTimedOut,
    "redeliver": ev.Redeliver,
}


def activation_event(message: Activation) -> ev.Event | None:
    """The state-machine event an activation stands for."""
    if message.signal in _RUN_SIGNALS:
        return _RUN_SIGNALS[message.signal]()
    if message.signal in _ATTEMPT_SIGNALS:
        return _ATTEMPT_SIGNALS[message.signal](message.task or "", message.attempt or 0)
    return None


def result_event(message: TaskResult, task: str, state: TaskState) -> ev.Event | None:
    """The event a worker result stands for; a heartbeat only counts if it was READY."""
    if message.kind == "finished" and message.outcome is not None:
        return ev.TaskFinished(task, message.attempt, TaskState(message.outcome))
    if message.kind == "started" or state in (TaskState.READY, TaskState.PAUSED):
        return ev.TaskStarted(task, message.attempt)
    return None
