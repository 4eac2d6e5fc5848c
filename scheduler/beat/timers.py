"""Run-level timers: the cancel grace period and the run timeout.

The rules: docs/decisions.md, "Run control" ("Cancel grace", "Run timeout").

Like the other duties, each claims due runs with ``FOR UPDATE SKIP LOCKED`` on a
partial index (O(due)) and marks them in the transaction that writes the activation,
so each is signalled once, even with several beats. The engine writes the due columns
when a run changes state (``scheduler.engine.changes``); a run an engine holds locked
is skipped and found again at the next tick.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.messaging.signals import activation
from common.persistence.models import Run
from common.persistence.outbox import enqueue
from scheduler.beat.duties import BATCH


def signal_cancel_grace(session: Session, now: datetime, grace: timedelta) -> list[int]:
    """A run still CANCEL_REQUESTED ``grace`` after the cancel gets ``cancel_grace_over``."""
    due = select(Run.id).where(
        Run.state == "CANCEL_REQUESTED", Run.cancel_grace_sent_at.is_(None),
        Run.cancel_requested_at <= now - grace,
    ).limit(BATCH).with_for_update(skip_locked=True)
    ids = list(session.scalars(due))
    if not ids:
        return []
    session.execute(update(Run).where(Run.id.in_(ids)).values(cancel_grace_sent_at=now))
    return enqueue(session, [activation(run_id, "cancel_grace_over") for run_id in ids])


def signal_run_timeouts(session: Session, now: datetime) -> list[int]:
    """A run past its ``timeout_at`` gets ``run_timeout``; the engine ends it TIMEOUT.

    Clearing ``timeout_at`` is the mark. The engine clears it too when the run
    finishes, so a finished run is never signalled.
    """
    due = select(Run.id).where(Run.timeout_at <= now).limit(BATCH).with_for_update(
        skip_locked=True
    )
    ids = list(session.scalars(
        update(Run).where(Run.id.in_(due)).values(timeout_at=None).returning(Run.id)
    ))
    return enqueue(session, [activation(run_id, "run_timeout") for run_id in ids])
