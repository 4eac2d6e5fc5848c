"""Creating a run: its rows, its journal entry and its messages, in the caller's transaction.

The run is created READY; the engine moves it on. When it is due now, the activation
is written to the outbox here and ``activation_sent_at`` set, so that the beat (which
activates due runs whose activation was not sent) does not send a second one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from uuid import UUID, uuid4

from sqlalchemy import func, insert, literal, select
from sqlalchemy.orm import Session

from common.domain.states import RunState, TaskState
from common.messaging.messages import Event
from common.messaging.signals import activation
from common.persistence.models import Job, JournalEntry, Run, Task, TaskRun
from common.persistence.notify_events import record_events
from common.persistence.outbox import enqueue
from scheduler.services.errors import Conflict, NotFound

Trigger = Literal["schedule", "manual", "api", "catchup"]


@dataclass(frozen=True)
class CreatedRun:
    """The new run and the outbox rows to relay once the transaction has committed."""

    run: Run
    outbox_ids: list[int]


def create_run(
    session: Session, job_id: UUID, trigger: Trigger, scheduled_for: datetime, now: datetime
) -> CreatedRun:
    """Create the job's next run in state READY, with one WAITING task run per task.

    The job row is locked so that two concurrent creations cannot take the same number.
    """
    job = session.scalars(select(Job).where(Job.id == job_id).with_for_update()).one_or_none()
    if job is None:
        raise NotFound("job", job_id)
    if job.draft:
        raise Conflict(f"job {job_id} is a draft (NEW): commit it before running it")
    due = scheduled_for <= now
    run = Run(
        id=uuid4(), job_id=job.id, number=_next_number(session, job.id), trigger=trigger,
        state=RunState.READY, scheduled_for=scheduled_for,
        activation_sent_at=now if due else None, created_at=now, updated_at=now,
        late_at=late_at(job, scheduled_for),
    )
    session.add(run)
    session.flush()
    _insert_task_runs(session, run)
    session.add(JournalEntry(
        run_id=run.id, task=None, attempt=None, at=now, from_state="",
        to_state=RunState.READY, reason="created", actor=trigger,
    ))
    record_events(session, [scheduled_event(job, run.id, now)])
    ids = enqueue(session, [activation(run.id, "start")] if due else [])
    return CreatedRun(run, ids)


def late_at(job: Job, scheduled_for: datetime) -> datetime | None:
    """When the beat announces the run late if it has not started (``run.late``)."""
    late_after = (job.spec or {}).get("late_after")
    return None if late_after is None else scheduled_for + timedelta(seconds=float(late_after))


def _next_number(session: Session, job_id: UUID) -> int:
    last = session.scalar(
        select(func.coalesce(func.max(Run.number), 0)).where(Run.job_id == job_id)
    )
    return int(last or 0) + 1


def _insert_task_runs(session: Session, run: Run) -> None:
    """One statement whatever the task count: a 20,000-task job stays one round trip."""
    source = select(
        func.gen_random_uuid(), literal(run.id), Task.id, Task.name, Task.type,
        literal(TaskState.WAITING.value), literal(0), literal(0), literal(""),
    ).where(Task.job_id == run.job_id)
    columns = ["id", "run_id", "task_id", "name", "type", "state", "attempt", "base", "message"]
    session.execute(insert(TaskRun).from_select(columns, source))


def scheduled_event(job: Job, run_id: UUID, now: datetime) -> Event:
    """The ``run.scheduled`` event of a run just created."""
    return Event(
        event="run.scheduled", at=now, job_id=job.id, job_name=job.name, job_type=job.type,
        application=job.application, tenant=job.tenant, run_id=run_id,
        state=RunState.READY, reason="created",
    )
