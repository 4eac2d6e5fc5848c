"""The run state machine: ``advance(run, event, now) -> Transition``.

Pure code: it reads a :class:`RunSnapshot` and returns the state changes and effects an
event causes (docs/architecture.md, "The pure core"). The engine loads the snapshot
under a row lock, calls
``advance``, persists the changes with their journal entries and records the effects
in the outbox, all in one transaction. Worker results for an attempt that is not
current are ignored (``Transition.ignored``); a person's action that the tables do not
allow raises :class:`Refused`, which the API turns into a 409 naming the state.
"""

from __future__ import annotations

from datetime import datetime
from typing import assert_never

from common.domain import actions, results
from common.domain import events as ev
from common.domain.draft import Draft
from common.domain.rules import Refused, settle
from common.domain.snapshot import RunSnapshot, Transition


def _handle(draft: Draft, event: ev.Event) -> None:
    """Hand ``event`` to its handler.

    ``assert_never``: an event added to ``ev.Event`` without a case is a type error.
    """
    match event:
        case ev.StartRun():
            actions.on_start(draft, event)
        case ev.CancelGraceOver():
            actions.on_cancel_grace_over(draft, event)
        case ev.RunTimedOut():
            actions.on_run_timed_out(draft, event)
        case (ev.TaskStarted() | ev.TaskFinished() | ev.RetryDue() | ev.LeaseExpired()
              | ev.TaskTimedOut() | ev.Redeliver() | ev.Reconcile()):
            _attempt_event(draft, event)
        case ev.CancelRun() | ev.PauseRun() | ev.ResumeRun() | ev.RetryRun():
            _run_action(draft, event)
        case ev.ConfirmTask() | ev.RejectTask() | ev.RetryTask() | ev.SkipTask():
            _task_action(draft, event)
        case _:
            assert_never(event)


def _attempt_event(
    draft: Draft,
    event: ev.TaskStarted | ev.TaskFinished | ev.RetryDue | ev.LeaseExpired | ev.TaskTimedOut
    | ev.Redeliver | ev.Reconcile,
) -> None:
    """What a worker reported, a timer of the beat, or the engine's repair."""
    match event:
        case ev.TaskStarted():
            results.on_started(draft, event)
        case ev.TaskFinished():
            results.on_finished(draft, event)
        case ev.RetryDue():
            results.on_retry_due(draft, event)
        case ev.LeaseExpired():
            results.on_lease_expired(draft, event)
        case ev.TaskTimedOut():
            results.on_task_timed_out(draft, event)
        case ev.Redeliver():
            results.on_redeliver(draft, event)
        case ev.Reconcile():
            results.on_reconcile(draft, event)
        case _:
            assert_never(event)


def _run_action(
    draft: Draft, event: ev.CancelRun | ev.PauseRun | ev.ResumeRun | ev.RetryRun
) -> None:
    """A person's action on the whole run."""
    match event:
        case ev.CancelRun():
            actions.on_cancel(draft, event)
        case ev.PauseRun():
            actions.on_pause(draft, event)
        case ev.ResumeRun():
            actions.on_resume(draft, event)
        case ev.RetryRun():
            actions.on_retry_run(draft, event)
        case _:
            assert_never(event)


def _task_action(
    draft: Draft, event: ev.ConfirmTask | ev.RejectTask | ev.RetryTask | ev.SkipTask
) -> None:
    """A person's action on one task."""
    match event:
        case ev.ConfirmTask():
            actions.on_confirm(draft, event)
        case ev.RejectTask():
            actions.on_reject(draft, event)
        case ev.RetryTask():
            actions.on_retry_task(draft, event)
        case ev.SkipTask():
            actions.on_skip(draft, event)
        case _:
            assert_never(event)


def advance(run: RunSnapshot, event: ev.Event, now: datetime) -> Transition:
    """Decide what ``event`` does to ``run`` at ``now``; ``run`` is not modified.

    Raises :class:`Refused` when a person's action is not allowed in the current state.
    """
    draft = Draft(run, now)
    _handle(draft, event)
    if draft.transition.ignored is None:
        settle(draft)
    return draft.transition


__all__ = ["Refused", "advance"]
