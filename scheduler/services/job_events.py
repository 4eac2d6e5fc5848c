"""The ``job.created`` and ``job.deleted`` events (docs/architecture.md, "Events").

Recorded for the notify runner in the transaction that creates or deletes the job, whichever
way the request came (REST or the ``stellwerk.jobs`` queue), so that the events mean
the same thing; ``request_id`` is set only for a queued request.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from sqlalchemy.orm import Session

from common.messaging.messages import Event
from common.persistence.models import Job
from common.persistence.notify_events import record_events

JobEventName = Literal["job.created", "job.deleted"]


def job_event(
    name: JobEventName, job: Job, now: datetime, *, state: str | None = None,
    run_id: UUID | None = None, request_id: str | None = None,
) -> Event:
    """The event about ``job``; ``run_id`` is a new one-off job's run."""
    return Event(
        event=name, at=now, job_id=job.id, job_name=job.name, job_type=job.type,
        application=job.application, tenant=job.tenant, run_id=run_id, state=state,
        reason=name.removeprefix("job."), request_id=request_id,
    )


def announce(session: Session, event: Event) -> None:
    """Record the event for the notify runner in the caller's transaction."""
    record_events(session, [event])
