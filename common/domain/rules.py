"""Rules shared by every event handler: dispatch, the canary gate, failure, settling."""

from __future__ import annotations

from common.domain.draft import Draft
from common.domain.snapshot import Dispatch, Stop
from common.domain.states import TASK_FAILURES, TASK_TERMINAL, RunState, TaskState

T = TaskState
R = RunState

RUNNING = frozenset({R.ACTIVE, R.CONFIRM, R.PAUSE_REQUESTED})
IN_FLIGHT = frozenset({T.READY, T.ACTIVE, T.CONFIRM, T.SOFT_FAILED})
CANCELABLE = frozenset({T.WAITING, T.READY, T.SOFT_FAILED, T.PAUSED, T.CONFIRM})
UNFINISHED = frozenset(set(TaskState) - TASK_TERMINAL)


class Refused(Exception):
    """An action the state tables do not allow in the current state."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


# --- dispatching --------------------------------------------------------------------


def dispatch(draft: Draft, task: str, reason: str) -> None:
    """Move a task to READY with a new attempt and send it to its queue."""
    attempt = draft.attempt(task) + 1
    draft.move(task, T.READY, reason, attempt)
    draft.effect(Dispatch(task, attempt))


def may_dispatch(draft: Draft, task: str) -> bool:
    """The canary gate and the run's state decide whether an eligible task goes now."""
    if draft.run_state != R.ACTIVE or draft.pending(task) != 0:
        return False
    type_ = draft.snap.info[task].type
    if not draft.snap.is_canary_type(type_):
        return True
    if draft.count(frozenset({T.COMPLETED}), type_) > 0:
        return True
    return draft.count(IN_FLIGHT, type_) == 0


def dispatch_successors(draft: Draft, task: str) -> None:
    """Dispatch the successors of a task that became done, where eligible."""
    for succ in draft.snap.graph.successors[task]:
        if draft.state(succ) == T.WAITING and may_dispatch(draft, succ):
            dispatch(draft, succ, "predecessors done")


def release_waiting(draft: Draft) -> None:
    """Dispatch every eligible WAITING task: after start, confirm, resume or retry."""
    for task in draft.tasks_in(frozenset({T.WAITING})):
        if may_dispatch(draft, task):
            dispatch(draft, task, "predecessors done")


# --- failure ------------------------------------------------------------------------


def apply_failure_rule(draft: Draft, task: str) -> None:
    """Fail the run at the threshold; below it, skip the failed task's descendants."""
    failed = draft.count(TASK_FAILURES)
    total = len(draft.snap.tasks)
    if failed / total >= draft.snap.failure_threshold:
        final = R.TIMEOUT if draft.state(task) == T.TIMEOUT else R.FAILED
        finish_run(draft, final, f"task {task!r} {draft.state(task).lower()}")
        return
    for descendant in draft.snap.graph.descendants(task):
        if draft.state(descendant) in frozenset({T.WAITING, T.READY, T.PAUSED}):
            draft.move(descendant, T.SKIPPED, f"predecessor {task!r} failed")


def finish_run(draft: Draft, final: RunState, reason: str) -> None:
    """End the run now: cancel what has not started, stop what is running."""
    draft.move_run(final, reason)
    cancel_tasks(draft, f"run {final.lower()}", stop_active=True)


def cancel_tasks(draft: Draft, reason: str, *, stop_active: bool) -> None:
    """Cancel unstarted tasks (revoking READY ones); optionally stop ACTIVE ones too."""
    for task in draft.tasks_in(CANCELABLE):
        if draft.state(task) == T.READY:
            draft.effect(Stop(task, draft.attempt(task)))
        draft.move(task, T.CANCELED, reason)
    if stop_active:
        for task in draft.tasks_in(frozenset({T.ACTIVE})):
            draft.effect(Stop(task, draft.attempt(task)))
            draft.move(task, T.CANCELED, reason)


# --- settling -----------------------------------------------------------------------


def settle(draft: Draft) -> None:
    """Derive the run's state from its tasks after every event."""
    state = draft.run_state
    if state == R.CANCEL_REQUESTED and draft.count(frozenset({T.ACTIVE})) == 0:
        draft.move_run(R.CANCELED, "no task left running")
    elif state in RUNNING and draft.count(UNFINISHED) == 0:
        draft.move_run(R.COMPLETED, "every task finished")
    elif state == R.PAUSE_REQUESTED and draft.count(frozenset({T.ACTIVE})) == 0:
        draft.move_run(R.PAUSED, "no task left running")
    elif state == R.ACTIVE and draft.count(frozenset({T.CONFIRM})) > 0:
        draft.move_run(R.CONFIRM, "a task waits for confirmation")
    elif state == R.CONFIRM and draft.count(frozenset({T.CONFIRM})) == 0:
        draft.move_run(R.ACTIVE, "confirmed")
        release_waiting(draft)
        settle(draft)
    elif state == R.ACTIVE and _canary_slot_freed(draft):
        release_waiting(draft)


def _canary_slot_freed(draft: Draft) -> bool:
    """True when a canary left flight unconfirmed (failed, skipped): the next may go."""
    if not draft.snap.canary:
        return False
    return any(
        c.old in IN_FLIGHT and c.new not in IN_FLIGHT | {T.COMPLETED}
        for c in draft.transition.task_changes
    )
