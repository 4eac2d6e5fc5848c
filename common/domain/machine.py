"""The run state machine: ``advance(run, event, now) -> Transition``.

Pure code: it reads a :class:`RunSnapshot` and returns the state changes and effects an
event causes (SPEC §3). The engine loads the snapshot under a row lock, calls
``advance``, persists the changes with their journal entries and records the effects
in the outbox, all in one transaction. Worker results for an attempt that is not
current are ignored (``Transition.ignored``); a person's action that the tables do not
allow raises :class:`Refused`, which the API turns into a 409 naming the state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from common.domain import actions, results
from common.domain import events as ev
from common.domain.draft import Draft
from common.domain.rules import Refused, settle
from common.domain.snapshot import RunSnapshot, Transition

_HANDLERS: dict[type[Any], Callable[[Draft, Any], None]] = {
    ev.StartRun: actions.on_start,
    ev.TaskStarted: results.on_started,
    ev.TaskFinished: results.on_finished,
    ev.RetryDue: results.on_retry_due,
    ev.LeaseExpired: results.on_lease_expired,
    ev.TaskTimedOut: results.on_task_timed_out,
    ev.Redeliver: results.on_redeliver,
    ev.Reconcile: results.on_reconcile,
    ev.CancelGraceOver: actions.on_cancel_grace_over,
    ev.RunTimedOut: actions.on_run_timed_out,
    ev.CancelRun: actions.on_cancel,
    ev.PauseRun: actions.on_pause,
    ev.ResumeRun: actions.on_resume,
    ev.RetryRun: actions.on_retry_run,
    ev.ConfirmTask: actions.on_confirm,
    ev.RejectTask: actions.on_reject,
    ev.RetryTask: actions.on_retry_task,
    ev.SkipTask: actions.on_skip,
}


def advance(run: RunSnapshot, event: ev.Event, now: datetime) -> Transition:
    """Decide what ``event`` does to ``run`` at ``now``; ``run`` is not modified.

    Raises :class:`Refused` when a person's action is not allowed in the current state.
    """
    draft = Draft(run, now)
    _HANDLERS[type(event)](draft, event)
    if draft.transition.ignored is None:
        settle(draft)
    return draft.transition


__all__ = ["Refused", "advance"]
