"""``run.late``: a run not started ``late_after`` past its ``scheduled_for``, once per run.

``runs.late_at`` is set when the run is created (``scheduler.services.runs``). The duty
claims runs whose ``late_at`` has come (``FOR UPDATE SKIP LOCKED``, a partial index:
O(due)) and clears it in the same transaction that records the event for notify, so
each run is announced at most once, also with several beats. A run that started in
time is only cleared; no state changes, so the engine is not involved.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.domain.states import RunState
from common.messaging.messages import Event
from common.persistence.models import Job, Run
from common.persistence.notify_events import record_events
from scheduler.beat.duties import BATCH


def announce_late_runs(session: Session, now: datetime) -> list[int]:
    """Announce ``run.late`` for each due run still waiting to start.

    Returns no outbox ids (a beat duty's result): the events are recorded for notify.
    """
    query = (
        select(Run.id, Run.state, Run.scheduled_for, Job.id.label("job_id"), Job.name,
               Job.type, Job.application, Job.tenant)
        .join(Job, Job.id == Run.job_id)
        .where(Run.late_at <= now)
        .limit(BATCH)
        .with_for_update(of=Run, skip_locked=True)
    )
    rows = session.execute(query).all()
    if not rows:
        return []
    session.execute(update(Run).where(Run.id.in_([r.id for r in rows])).values(late_at=None))
    late = [row for row in rows if row.state == RunState.READY]
    record_events(session, [_late_event(row, now) for row in late])
    return []


def _late_event(row: Any, now: datetime) -> Event:
    return Event(
        event="run.late", at=now, job_id=row.job_id, job_name=row.name, job_type=row.type,
        application=row.application, tenant=row.tenant, run_id=row.id,
        previous=row.state, state=row.state,
        reason=f"not started {now - row.scheduled_for} after its scheduled time",
    )
