"""Creating runs: their rows, journal entries, events and activations, in one way.

Every run is made by :func:`create_runs`, a few statements for the whole batch
(issue 15: the ORM path that ``create_run`` used to be cost half a dozen round trips
per run, several milliseconds per fire for the beat: 250 fires a second took a whole
core). A run is created READY, with one WAITING task run per task, a first journal
entry (from ``''``), a ``run.scheduled`` event and its ``late_at``; the engine moves
it on. :func:`create_run` is the one-run call the API, a job going live and the beat's
serial cron path use: it locks the job (so two concurrent creations cannot take the
same number), refuses drafts, and writes the activation of a run due now to the
outbox, setting ``activation_sent_at`` so that the beat (which activates due runs
whose activation was not sent) does not send a second one. The beat's cron batch
leaves the activations to ``start_due_runs``, which times them; it holds the jobs'
row locks itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID, uuid4

from psycopg import Connection as PgConnection
from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.states import RunState
from common.messaging.messages import Event
from common.messaging.signals import activation
from common.persistence.arrays import literal, literals
from common.persistence.db import driver
from common.persistence.models import Job
from common.persistence.notify_events import record_events
from common.persistence.outbox import enqueue
from common.persistence.queries import (
    INSERT_FIRST_JOURNAL,
    INSERT_RUNS,
    INSERT_TASK_RUNS,
    LAST_RUN_NUMBERS,
)
from common.tracing import span
from scheduler.services.errors import Conflict, NotFound

# What made a run: its schedule (a date, a cron fire), a catch-up fire, the job's
# submission (or commit) when it has no date, or a person's "run now" (the API).
Trigger = Literal["schedule", "manual", "api", "catchup", "submit"]


@dataclass(frozen=True)
class NewRun:
    """One run to create: its id is chosen by the caller (a fire row points at it)."""

    id: UUID
    job: Job
    trigger: Trigger
    scheduled_for: datetime


@dataclass(frozen=True)
class CreatedRun:
    """The new run's id and the outbox rows to relay once the transaction has committed."""

    run_id: UUID
    outbox_ids: list[int]


def create_run(
    session: Session, job_id: UUID, trigger: Trigger, scheduled_for: datetime, now: datetime
) -> CreatedRun:
    """Create the job's next run; activate it now if it is due (see the module doc)."""
    job = session.scalars(select(Job).where(Job.id == job_id).with_for_update()).one_or_none()
    if job is None:
        raise NotFound("job", job_id)
    if job.draft:
        raise Conflict(f"job {job_id} is a draft (NEW): commit it before running it")
    run = NewRun(uuid4(), job, trigger, scheduled_for)
    return CreatedRun(run.id, create_runs(session, [run], now, start_due=True))


def create_runs(
    session: Session, runs: Sequence[NewRun], now: datetime, *, start_due: bool = False
) -> list[int]:
    """Insert the runs, their task runs, journal entries and ``run.scheduled`` events.

    The caller holds the jobs' row locks, which keeps run numbers unique. With
    ``start_due``, the runs due by ``now`` get their activation here; the ids of the
    outbox rows written are returned.
    """
    if not runs:
        return []
    conn = driver(session)
    numbers = _numbers(conn, runs)
    # A capped job's runs are started by the beat, which counts its unfinished ones.
    due = [start_due and r.scheduled_for <= now and r.job.max_active_runs is None
           for r in runs]
    ids = [r.id for r in runs]
    traces = [run_trace(r, numbers[r.id]) for r in runs]
    conn.execute(INSERT_RUNS, (now, now, *literals((
        ids, [r.job.id for r in runs], [numbers[r.id] for r in runs],
        [r.trigger for r in runs], [r.scheduled_for for r in runs],
        [late_at(r.job, r.scheduled_for) for r in runs], [now if d else None for d in due],
        traces,
    ))))
    conn.execute(INSERT_TASK_RUNS, literals((ids, [r.job.id for r in runs])))
    conn.execute(INSERT_FIRST_JOURNAL, (now, *literals((ids, [r.trigger for r in runs]))))
    record_events(session, [scheduled_event(r.job, r.id, now, trace)
                            for r, trace in zip(runs, traces, strict=True)])
    starts = [activation(r.id, "start") for r, d in zip(runs, due, strict=True) if d]
    return enqueue(session, starts)


def run_trace(run: NewRun, number: int) -> str | None:
    """The run's trace: a span of its creation (a child of the request's, if any); None off."""
    with span("stellwerk.run.created", attributes={
        "stellwerk.job": run.job.name, "stellwerk.run_id": str(run.id),
        "stellwerk.run.number": number, "stellwerk.run.trigger": run.trigger,
    }) as traceparent:
        return traceparent


def late_at(job: Job, scheduled_for: datetime) -> datetime | None:
    """When the beat announces the run late if it has not started (``run.late``)."""
    late_after = (job.spec or {}).get("late_after")
    return None if late_after is None else scheduled_for + timedelta(seconds=float(late_after))


def scheduled_event(
    job: Job, run_id: UUID, now: datetime, traceparent: str | None = None,
) -> Event:
    """The ``run.scheduled`` event of a run just created."""
    return Event(
        event="run.scheduled", at=now, job_id=job.id, job_name=job.name, job_type=job.type,
        application=job.application, tenant=job.tenant, run_id=run_id,
        state=RunState.READY, reason="created", traceparent=traceparent,
    )


def _numbers(conn: PgConnection[Any], runs: Sequence[NewRun]) -> dict[UUID, int]:
    """Each run's number: the job's last one plus its place among this batch's runs."""
    job_ids = list({r.job.id for r in runs})
    last: dict[UUID, int] = dict(conn.execute(LAST_RUN_NUMBERS, (literal(job_ids),)).fetchall())
    numbers = {}
    for run in sorted(runs, key=lambda r: r.scheduled_for):
        last[run.job.id] = numbers[run.id] = last.get(run.job.id, 0) + 1
    return numbers
