"""Task-run and run states, and the transition tables every state change must pass.

The tables are the single authority on what may follow what (docs/architecture.md, "The
pure core"). The engine
never writes a state the table does not allow; an API action that would need such a
change is refused with the current state (409).
"""

from __future__ import annotations

from enum import StrEnum


class TaskState(StrEnum):
    """The state of one task in one run."""

    WAITING = "WAITING"
    READY = "READY"
    ACTIVE = "ACTIVE"
    CONFIRM = "CONFIRM"
    COMPLETED = "COMPLETED"
    SOFT_FAILED = "SOFT_FAILED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    SKIPPED = "SKIPPED"
    REJECTED = "REJECTED"
    CANCELED = "CANCELED"
    PAUSED = "PAUSED"


class RunState(StrEnum):
    """The state of one execution of a job."""

    NEW = "NEW"
    READY = "READY"
    ACTIVE = "ACTIVE"
    CONFIRM = "CONFIRM"
    PAUSE_REQUESTED = "PAUSE_REQUESTED"
    PAUSED = "PAUSED"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    CANCELED = "CANCELED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"


T = TaskState
R = RunState

TASK_TERMINAL: frozenset[TaskState] = frozenset(
    {T.COMPLETED, T.FAILED, T.TIMEOUT, T.SKIPPED, T.REJECTED, T.CANCELED}
)
# States that let a successor go on: a join waits until all predecessors are in these.
TASK_DONE: frozenset[TaskState] = frozenset({T.COMPLETED, T.SKIPPED})
# States counted as failures against the run's failure threshold.
TASK_FAILURES: frozenset[TaskState] = frozenset({T.FAILED, T.TIMEOUT, T.REJECTED})
RUN_TERMINAL: frozenset[RunState] = frozenset({R.COMPLETED, R.FAILED, R.TIMEOUT, R.CANCELED})
RUN_UNFINISHED: frozenset[RunState] = frozenset(set(RunState) - RUN_TERMINAL - {R.NEW})

TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    T.WAITING: frozenset({T.READY, T.SKIPPED, T.CANCELED}),
    # READY -> READY: an attempt claimed by a worker that died before it started is
    # requeued as the next attempt.
    T.READY: frozenset({T.ACTIVE, T.PAUSED, T.CANCELED, T.SKIPPED, T.READY}),
    T.ACTIVE: frozenset(
        {T.COMPLETED, T.CONFIRM, T.SOFT_FAILED, T.FAILED, T.TIMEOUT, T.REJECTED,
         T.CANCELED, T.READY, T.PAUSED}
    ),
    T.CONFIRM: frozenset({T.COMPLETED, T.REJECTED, T.CANCELED}),
    T.SOFT_FAILED: frozenset({T.READY, T.PAUSED, T.CANCELED}),
    # PAUSED -> ACTIVE: a worker had already taken the attempt when the pause came.
    T.PAUSED: frozenset({T.READY, T.WAITING, T.CANCELED, T.SKIPPED, T.ACTIVE}),
    T.COMPLETED: frozenset({T.WAITING}),
    T.FAILED: frozenset({T.WAITING, T.SKIPPED}),
    T.TIMEOUT: frozenset({T.WAITING, T.SKIPPED}),
    T.SKIPPED: frozenset({T.WAITING}),
    T.REJECTED: frozenset({T.WAITING}),
    T.CANCELED: frozenset({T.WAITING}),
}

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    R.NEW: frozenset({R.READY, R.CANCELED}),
    R.READY: frozenset({R.ACTIVE, R.CANCELED}),
    R.ACTIVE: frozenset(
        {R.CONFIRM, R.PAUSE_REQUESTED, R.PAUSED, R.CANCEL_REQUESTED, R.COMPLETED, R.FAILED,
         R.TIMEOUT}
    ),
    R.CONFIRM: frozenset(
        {R.ACTIVE, R.PAUSE_REQUESTED, R.PAUSED, R.CANCEL_REQUESTED, R.FAILED, R.TIMEOUT,
         R.COMPLETED}
    ),
    R.PAUSE_REQUESTED: frozenset(
        {R.PAUSED, R.ACTIVE, R.CANCEL_REQUESTED, R.COMPLETED, R.FAILED, R.TIMEOUT}
    ),
    # PAUSED -> PAUSE_REQUESTED: a task paused while READY turns out to be running.
    R.PAUSED: frozenset(
        {R.ACTIVE, R.PAUSE_REQUESTED, R.CANCEL_REQUESTED, R.CANCELED, R.TIMEOUT, R.FAILED}
    ),
    R.CANCEL_REQUESTED: frozenset({R.CANCELED}),
    R.COMPLETED: frozenset({R.ACTIVE}),
    R.FAILED: frozenset({R.ACTIVE}),
    R.TIMEOUT: frozenset({R.ACTIVE}),
    R.CANCELED: frozenset({R.ACTIVE}),
}


def task_may(current: TaskState, target: TaskState) -> bool:
    """Tell whether the task table allows ``current -> target``."""
    return target in TASK_TRANSITIONS[current]


def run_may(current: RunState, target: RunState) -> bool:
    """Tell whether the run table allows ``current -> target``."""
    return target in RUN_TRANSITIONS[current]
