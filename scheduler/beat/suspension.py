"""Suspension: pause a run at ``suspend_at`` / ``suspend_after``, auto-resume it a day on.

The engine sets ``runs.suspend_due_at`` when a run starts (``scheduler.engine.changes``).
When it comes, a running run is paused as a person pauses it (signal ``suspend``:
PAUSE_REQUESTED, reason ``suspended``, then PAUSED once no task is ACTIVE). With
``auto_resume`` the run resumes at the time of day its window began, on the next day
(``resume_due_at``), and is suspended again after the same window: the window moves
by a day each time. Both duties claim due rows with ``FOR UPDATE SKIP LOCKED`` on
partial indexes (O(due)) and signal the engine through activations in the outbox.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.domain.states import RUN_TERMINAL, RunState
from common.messaging.signals import activation
from common.persistence.models import Job, Run
from common.persistence.outbox import enqueue
from scheduler.beat.duties import BATCH

DAY = timedelta(days=1)
PAUSABLE = frozenset({RunState.ACTIVE, RunState.CONFIRM})
RESUMABLE = frozenset({RunState.PAUSED, RunState.PAUSE_REQUESTED})


def suspend_due_runs(session: Session, now: datetime) -> list[int]:
    """Pause the running runs whose suspension time has come; plan their resumption."""
    rows = _claim(session, Run.suspend_due_at, now)
    messages = []
    for row in rows:
        if RunState(row.state) in PAUSABLE:
            messages.append(activation(row.id, "suspend"))
        resume = _resume_at(row, now) if _auto_resumes(row) else None
        session.execute(update(Run).where(Run.id == row.id).values(
            suspend_due_at=None, resume_due_at=resume,
        ))
    return enqueue(session, messages)


def resume_due_runs(session: Session, now: datetime) -> list[int]:
    """Resume suspended runs whose time has come; the next suspension follows a window on."""
    rows = _claim(session, Run.resume_due_at, now)
    messages = []
    for row in rows:
        if RunState(row.state) in RESUMABLE:
            messages.append(activation(row.id, "auto_resume"))
        unfinished = RunState(row.state) not in RUN_TERMINAL
        resumed_at = row.resume_due_at
        session.execute(update(Run).where(Run.id == row.id).values(
            resume_due_at=None,
            suspend_due_at=resumed_at + _window(row) if unfinished else None,
        ))
    return enqueue(session, messages)


def _claim(session: Session, due_at: Any, now: datetime) -> list[Any]:
    query = (
        select(Run.id, Run.state, Run.started_at, Run.suspend_due_at, Run.resume_due_at,
               Job.spec)
        .join(Job, Job.id == Run.job_id)
        .where(due_at <= now)
        .limit(BATCH)
        .with_for_update(of=Run, skip_locked=True)
    )
    return list(session.execute(query).all())


def _auto_resumes(row: Any) -> bool:
    return bool((row.spec or {}).get("auto_resume")) and RunState(row.state) not in RUN_TERMINAL


def _window(row: Any) -> timedelta:
    """How long the run may go each day: from its window's start to its suspension.

    ``suspend_after`` is that length; for ``suspend_at`` it is the time from the run's
    start to that date. Only its part below a day counts (a resumption is "the same
    time of day on the next day"); a whole number of days counts as one day.
    """
    spec = row.spec or {}
    if spec.get("suspend_after") is not None:
        length = timedelta(seconds=float(spec["suspend_after"]))
    elif spec.get("suspend_at") and row.started_at is not None:
        length = datetime.fromisoformat(spec["suspend_at"]) - row.started_at
    else:
        length = DAY
    return length % DAY or DAY


def _resume_at(row: Any, now: datetime) -> datetime:
    """The start of the run's window, on the day after its suspension (never the past)."""
    suspended_at = row.suspend_due_at
    resume: datetime = suspended_at + DAY - _window(row)
    while resume <= now:
        resume += DAY
    return resume
