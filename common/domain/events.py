"""What can happen to a run: the inputs of :func:`common.domain.machine.advance`.

Worker results carry the attempt they belong to, so a late or repeated result can be
recognised and ignored; actions by a person carry only the task name.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.domain.states import TaskState


@dataclass(frozen=True)
class StartRun:
    """The run's scheduled time has come."""


@dataclass(frozen=True)
class TaskStarted:
    """A worker took the task's current attempt."""

    task: str
    attempt: int


@dataclass(frozen=True)
class TaskFinished:
    """A worker, connector or post-back reports the outcome of an attempt."""

    task: str
    attempt: int
    outcome: TaskState  # COMPLETED, FAILED, REJECTED or TIMEOUT


@dataclass(frozen=True)
class RetryDue:
    """The backoff of a SOFT_FAILED attempt has passed."""

    task: str
    attempt: int


@dataclass(frozen=True)
class LeaseExpired:
    """The worker holding the attempt stopped renewing its lease: it is presumed dead.

    Also sent for a READY attempt whose claim is held by a worker that is no longer
    live (it died in the moments before it reported ``started``).
    """

    task: str
    attempt: int


@dataclass(frozen=True)
class TaskTimedOut:
    """The attempt is ACTIVE past its timeout and its worker did not report it."""

    task: str
    attempt: int


@dataclass(frozen=True)
class Redeliver:
    """Send a READY attempt's dispatch again (repair: it may never have been queued)."""

    task: str
    attempt: int


@dataclass(frozen=True)
class Reconcile:
    """Settle the run's state from its tasks (repair of a transition left half-done)."""


@dataclass(frozen=True)
class CancelGraceOver:
    """Tasks told to stop have had their grace period; they are canceled now."""


@dataclass(frozen=True)
class RunTimedOut:
    """The run is older than its timeout."""


@dataclass(frozen=True)
class CancelRun:
    """A person or the API cancels the run."""


@dataclass(frozen=True)
class PauseRun:
    """A person pauses the run, or its suspension time has come."""

    reason: str = "pause requested"


@dataclass(frozen=True)
class ResumeRun:
    """A person resumes a paused run, or its auto-resume time has come."""

    reason: str = "resumed"


@dataclass(frozen=True)
class RetryRun:
    """Run again what failed, timed out, was canceled, rejected or skipped."""


@dataclass(frozen=True)
class ConfirmTask:
    """A person confirms a task waiting in CONFIRM."""

    task: str


@dataclass(frozen=True)
class RejectTask:
    """A person rejects a task waiting in CONFIRM."""

    task: str


@dataclass(frozen=True)
class RetryTask:
    """Run a task and all its descendants again."""

    task: str


@dataclass(frozen=True)
class SkipTask:
    """Mark a task SKIPPED so that its successors go on."""

    task: str


Event = (
    StartRun | TaskStarted | TaskFinished | RetryDue | LeaseExpired | CancelGraceOver
    | RunTimedOut | CancelRun | PauseRun | ResumeRun | RetryRun | ConfirmTask | RejectTask
    | RetryTask | SkipTask | TaskTimedOut | Redeliver | Reconcile
)
