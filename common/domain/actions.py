"""How a person's actions and the run-level timers move a run (docs/decisions.md, "Run control")."""

from __future__ import annotations

from common.domain import events as ev
from common.domain.draft import Draft
from common.domain.rules import (
    RUNNING,
    UNFINISHED,
    Refused,
    cancel_tasks,
    dispatch_successors,
    finish_run,
    release_waiting,
)
from common.domain.snapshot import Dispatch, Stop
from common.domain.states import RUN_TERMINAL, TASK_DONE, RunState, TaskState

T = TaskState
R = RunState

SKIPPABLE = frozenset({T.WAITING, T.READY, T.PAUSED, T.FAILED, T.TIMEOUT})
RETRYABLE = frozenset({T.FAILED, T.TIMEOUT, T.CANCELED, T.REJECTED, T.SKIPPED})


def _require_run(draft: Draft, allowed: frozenset[RunState], action: str) -> None:
    if draft.run_state not in allowed:
        raise Refused(f"run is {draft.run_state}: cannot {action}", draft.run_state)


def _require_task(draft: Draft, task: str, allowed: frozenset[TaskState], action: str) -> None:
    if task not in draft.snap.tasks:
        raise Refused(f"the run has no task {task!r}", draft.run_state)
    if draft.state(task) not in allowed:
        state = draft.state(task)
        raise Refused(f"cannot {action} task {task!r}: it is {state}", state)


def on_start(draft: Draft, event: ev.StartRun) -> None:
    """READY run -> ACTIVE, and its start tasks are dispatched."""
    if draft.run_state != R.READY:
        draft.transition.ignored = f"run is {draft.run_state}, not READY"
        return
    draft.move_run(R.ACTIVE, "scheduled time reached")
    release_waiting(draft)


def on_cancel(draft: Draft, event: ev.CancelRun) -> None:
    """Cancel now what has not started; ask running tasks to stop."""
    if draft.run_state in (R.READY, R.NEW):
        draft.move_run(R.CANCELED, "canceled before it started")
        cancel_tasks(draft, "run canceled", stop_active=False)
        return
    _require_run(draft, frozenset(RunState) - RUN_TERMINAL - {R.CANCEL_REQUESTED}, "cancel")
    draft.move_run(R.CANCEL_REQUESTED, "cancel requested")
    cancel_tasks(draft, "run canceled", stop_active=False)
    for task in draft.tasks_in(frozenset({T.ACTIVE})):
        draft.effect(Stop(task, draft.attempt(task)))


def on_cancel_grace_over(draft: Draft, event: ev.CancelGraceOver) -> None:
    """Tasks that did not stop within the grace period are canceled anyway."""
    if draft.run_state != R.CANCEL_REQUESTED:
        draft.transition.ignored = f"run is {draft.run_state}"
        return
    for task in draft.tasks_in(frozenset({T.ACTIVE})):
        draft.move(task, T.CANCELED, "did not stop within the grace period")


def on_run_timed_out(draft: Draft, event: ev.RunTimedOut) -> None:
    """The whole run took longer than its timeout."""
    if draft.run_state in RUN_TERMINAL or draft.run_state in (R.NEW, R.READY):
        draft.transition.ignored = f"run is {draft.run_state}"
        return
    if draft.run_state == R.CANCEL_REQUESTED:
        draft.move_run(R.CANCELED, "run timeout while canceling")
        cancel_tasks(draft, "run timeout", stop_active=True)
        return
    finish_run(draft, R.TIMEOUT, "run timeout")


def on_pause(draft: Draft, event: ev.PauseRun) -> None:
    """READY and SOFT_FAILED tasks pause; ACTIVE ones finish first."""
    _require_run(draft, frozenset({R.ACTIVE, R.CONFIRM}), "pause")
    draft.move_run(R.PAUSE_REQUESTED, event.reason)
    for task in draft.tasks_in(frozenset({T.READY, T.SOFT_FAILED})):
        if draft.state(task) == T.READY:
            draft.effect(Stop(task, draft.attempt(task)))
        draft.move(task, T.PAUSED, "run paused")


def on_resume(draft: Draft, event: ev.ResumeRun) -> None:
    """PAUSED tasks go back to READY (a new attempt) or WAITING; the run goes on."""
    _require_run(draft, frozenset({R.PAUSED, R.PAUSE_REQUESTED}), "resume")
    draft.move_run(R.ACTIVE, event.reason)
    for task in draft.tasks_in(frozenset({T.PAUSED})):
        if draft.pending(task) == 0:
            attempt = draft.attempt(task) + 1
            draft.move(task, T.READY, "run resumed", attempt)
            draft.effect(Dispatch(task, attempt))
        else:
            draft.move(task, T.WAITING, "run resumed")
    release_waiting(draft)


def on_retry_run(draft: Draft, event: ev.RetryRun) -> None:
    """Failed, timed-out, canceled, rejected and skipped tasks run again."""
    _require_run(draft, frozenset({R.FAILED, R.TIMEOUT, R.CANCELED}), "retry")
    draft.move_run(R.ACTIVE, "retry requested")
    for task in draft.tasks_in(RETRYABLE):
        draft.move(task, T.WAITING, "run retried", rebase=True)
    release_waiting(draft)


def on_retry_task(draft: Draft, event: ev.RetryTask) -> None:
    """The task and all its descendants run again, also on a COMPLETED run.

    A FAILED, TIMEOUT or CANCELED run is retried as a whole (``RetryRun``): its other
    unfinished branches would otherwise stay canceled behind a "completed" run.
    """
    _require_task(draft, event.task, RETRYABLE | {T.COMPLETED}, "retry")
    if draft.run_state not in RUNNING | {R.COMPLETED}:
        raise Refused(f"run is {draft.run_state}: cannot retry a task alone; retry the whole "
                      "run instead (POST /runs/{id}/retry, `stellwerk retry RUN`): its failed "
                      "and unfinished tasks run again", draft.run_state)
    blocking = [p for p in draft.snap.graph.predecessors[event.task]
                if draft.state(p) not in TASK_DONE]
    if blocking:
        state = draft.state(blocking[0])
        raise Refused(f"cannot retry task {event.task!r}: its predecessor {blocking[0]!r} "
                      f"is {state}; retry that one instead", state)
    family = _retry_family(draft, event.task)
    busy = [t for t in family if draft.state(t) in UNFINISHED - {T.WAITING}]
    if busy:
        state = draft.state(busy[0])
        raise Refused(f"cannot retry task {event.task!r}: {busy[0]!r} is {state}", state)
    if draft.run_state == R.COMPLETED:
        draft.move_run(R.ACTIVE, f"task {event.task!r} retried")
    for task in family:
        if draft.state(task) != T.WAITING:
            draft.move(task, T.WAITING, f"task {event.task!r} retried", rebase=True)
    release_waiting(draft)


def _retry_family(draft: Draft, task: str) -> list[str]:
    """The task and those descendants whose every predecessor will be done again.

    A descendant that also waits on a failed branch outside the family stays as it is
    (SKIPPED): reset, it would wait for ever.
    """
    graph = draft.snap.graph
    descendants = set(graph.descendants(task))
    family = [task]
    for name in graph.order:
        if name in descendants and all(
            p in family or draft.state(p) in TASK_DONE for p in graph.predecessors[name]
        ):
            family.append(name)
    return family


def on_skip(draft: Draft, event: ev.SkipTask) -> None:
    """The task counts as done for its successors."""
    _require_task(draft, event.task, SKIPPABLE, "skip")
    if draft.state(event.task) == T.READY:
        draft.effect(Stop(event.task, draft.attempt(event.task)))
    draft.move(event.task, T.SKIPPED, "skipped by request")
    if draft.run_state not in RUN_TERMINAL:
        dispatch_successors(draft, event.task)


def on_confirm(draft: Draft, event: ev.ConfirmTask) -> None:
    """A confirmed task completes; its successors and held tasks of its type go on."""
    _require_task(draft, event.task, frozenset({T.CONFIRM}), "confirm")
    draft.move(event.task, T.COMPLETED, "confirmed")
    dispatch_successors(draft, event.task)


def on_reject(draft: Draft, event: ev.RejectTask) -> None:
    """A rejected task fails the run; what is left is canceled."""
    _require_task(draft, event.task, frozenset({T.CONFIRM}), "reject")
    draft.move(event.task, T.REJECTED, "rejected")
    if draft.run_state not in RUN_TERMINAL:
        finish_run(draft, R.FAILED, f"task {event.task!r} rejected")

