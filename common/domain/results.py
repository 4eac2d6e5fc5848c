"""How worker results and timers move a run: started, finished, retry due, lease lost."""

from __future__ import annotations

from common.domain import events as ev
from common.domain.draft import Draft
from common.domain.rules import RUNNING, apply_failure_rule, dispatch, dispatch_successors
from common.domain.snapshot import Dispatch, RetryAt, Stop
from common.domain.states import RunState, TaskState

T = TaskState
R = RunState


def _is_current(draft: Draft, task: str, attempt: int, states: frozenset[TaskState]) -> bool:
    """True when the message is about the task's current attempt in one of ``states``."""
    if task not in draft.snap.tasks or draft.attempt(task) != attempt:
        draft.transition.ignored = f"task {task!r} attempt {attempt} is not current"
        return False
    if draft.state(task) not in states:
        draft.transition.ignored = f"task {task!r} is {draft.state(task)}"
        return False
    return True


def on_started(draft: Draft, event: ev.TaskStarted) -> None:
    """READY (or just paused) -> ACTIVE: a worker has the attempt."""
    if _is_current(draft, event.task, event.attempt, frozenset({T.READY, T.PAUSED})):
        _take(draft, event.task)


def _take(draft: Draft, task: str) -> None:
    """Move a READY or PAUSED task to ACTIVE; a paused run must wait for it again."""
    if draft.state(task) == T.PAUSED and draft.run_state == R.PAUSED:
        draft.move_run(R.PAUSE_REQUESTED, f"paused task {task!r} was already running")
    draft.move(task, T.ACTIVE, "taken by a worker")


def on_finished(draft: Draft, event: ev.TaskFinished) -> None:
    """Apply an attempt's outcome; a READY task passes through ACTIVE first."""
    task = event.task
    if not _is_current(draft, task, event.attempt, frozenset({T.READY, T.ACTIVE, T.PAUSED})):
        return
    if draft.state(task) != T.ACTIVE:
        _take(draft, task)
    if draft.run_state == R.CANCEL_REQUESTED:
        draft.move(task, T.CANCELED, f"stopped after cancel ({event.outcome})")
    elif event.outcome == T.COMPLETED:
        on_completed(draft, task)
    elif event.outcome == T.REJECTED:
        draft.move(task, T.REJECTED, "rejected by its processor")
        apply_failure_rule(draft, task)
    else:
        on_failed(draft, task, event.outcome)


def on_completed(draft: Draft, task: str) -> None:
    """COMPLETED, or CONFIRM for a canary or a ``confirm: true`` task."""
    info = draft.snap.info[task]
    canary = (
        draft.snap.is_canary_type(info.type)
        and draft.count(frozenset({T.COMPLETED}), info.type) == 0
    )
    if info.confirm or canary:
        draft.move(task, T.CONFIRM, "canary waits for confirmation" if canary else "confirm")
        return
    draft.move(task, T.COMPLETED, "completed")
    dispatch_successors(draft, task)


def on_failed(draft: Draft, task: str, outcome: TaskState) -> None:
    """SOFT_FAILED with a backoff while retries are left, else the failure rule."""
    attempt = draft.attempt(task)
    used = attempt - draft.base(task)
    info = draft.snap.info[task]
    if used <= info.retries:
        draft.move(task, T.SOFT_FAILED, f"{outcome.lower()}; retry {used} of {info.retries}")
        draft.effect(RetryAt(task, attempt, info.retry_backoff * 2 ** (used - 1)))
        return
    final = T.TIMEOUT if outcome == T.TIMEOUT else T.FAILED
    draft.move(task, final, "no retries left" if info.retries else str(outcome.lower()))
    apply_failure_rule(draft, task)


def on_retry_due(draft: Draft, event: ev.RetryDue) -> None:
    """A SOFT_FAILED task goes again with ``attempt + 1`` (not while pausing)."""
    if not _is_current(draft, event.task, event.attempt, frozenset({T.SOFT_FAILED})):
        return
    if draft.run_state in RUNNING - {R.PAUSE_REQUESTED}:
        dispatch(draft, event.task, "backoff passed")


def on_lease_expired(draft: Draft, event: ev.LeaseExpired) -> None:
    """Requeue the attempt of a lost worker, or settle it if the run is stopping.

    A READY attempt counts too: the beat sends this for one whose claimant died
    before it reported ``started`` (``scheduler.beat.attempts``).
    """
    if not _is_current(draft, event.task, event.attempt, frozenset({T.ACTIVE, T.READY})):
        return
    # A worker judged lost may only have been stopped (SIGSTOP, a long pause): it is
    # told to drop the attempt, running or not yet begun, when it comes back.
    draft.effect(Stop(event.task, event.attempt))
    if draft.run_state == R.CANCEL_REQUESTED:
        draft.move(event.task, T.CANCELED, "lease expired while canceling")
    elif draft.run_state == R.PAUSE_REQUESTED:
        draft.move(event.task, T.PAUSED, "lease expired while pausing")
    else:
        dispatch(draft, event.task, "lease expired: worker lost")


def on_task_timed_out(draft: Draft, event: ev.TaskTimedOut) -> None:
    """The engine's backstop for a worker that is gone or does not stop at its timeout.

    The worker itself reports TIMEOUT at the deadline; this comes a lease later, so it
    only acts when the worker did not. The attempt is told to stop in case it lives.
    """
    if not _is_current(draft, event.task, event.attempt, frozenset({T.ACTIVE})):
        return
    draft.effect(Stop(event.task, event.attempt))
    on_finished(draft, ev.TaskFinished(event.task, event.attempt, T.TIMEOUT))


def on_redeliver(draft: Draft, event: ev.Redeliver) -> None:
    """Dispatch a READY attempt again under the same attempt number.

    Harmless if the first dispatch did arrive: the worker's claim lets one run.
    """
    if _is_current(draft, event.task, event.attempt, frozenset({T.READY})):
        draft.effect(Dispatch(event.task, event.attempt))


def on_reconcile(draft: Draft, event: ev.Reconcile) -> None:
    """Nothing to do here: :func:`advance` settles the run after every event."""
