"""A job's lifecycle: going live (create or ``commit``), and being deleted.

Creating a non-draft job and committing a draft do the same thing (a draft is NEW,
nothing scheduled, until committed: docs/job-spec.md, ``draft``), so both call
:func:`go_live`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from common.domain.cron import CronError, CronSchedule
from common.domain.states import RUN_UNFINISHED, RunState
from common.messaging.messages import utcnow
from common.persistence.models import Job, Run
from scheduler.services.errors import Conflict, InvalidInput, NotFound
from scheduler.services.job_events import announce, job_event
from scheduler.services.job_queries import job_state
from scheduler.services.runs import create_run
from scheduler.services.subscriptions import delete_job_subscriptions


@dataclass(frozen=True)
class LiveJob:
    """What going live created: the run of a one-off job, and outbox rows to relay."""

    run_id: UUID | None
    outbox_ids: list[int]


def go_live(session: Session, job: Job, now: datetime) -> LiveJob:
    """Schedule a committed job: a one-off gets its run now (or at ``at``), a cron its fire."""
    cron = job.schedule.get("cron")
    if cron is not None:
        job.next_fire_at = next_fire_at(job, now)
        return LiveJob(None, [])
    at = job.schedule.get("at")
    # As it happened (issue 17): a job without a date runs because it was submitted
    # (or committed); one with a date because its schedule says so.
    if at:
        created = create_run(session, job.id, "schedule", datetime.fromisoformat(at), now)
    else:
        created = create_run(session, job.id, "submit", now, now)
    return LiveJob(created.run_id, created.outbox_ids)


def next_fire_at(job: Job, now: datetime) -> datetime | None:
    """When an enabled, committed cron job fires next (after ``now``); else None.

    Rescheduling "from now" is deliberate: a job re-enabled or given a new expression
    does not catch up on fires it was not meant to have.
    """
    cron = job.schedule.get("cron")
    if cron is None or job.draft or not job.enabled:
        return None
    try:
        schedule = CronSchedule.parse(cron, job.schedule.get("timezone") or "UTC")
    except CronError as error:
        raise InvalidInput(("body", "schedule", "cron"), str(error)) from error
    return schedule.next_after(now)


def commit_job(session: Session, job_id: UUID, now: datetime) -> LiveJob:
    """Make a draft live; a job that is not a draft is a :class:`Conflict` naming its state."""
    job = lock_job(session, job_id)
    if not job.draft:
        latest = session.scalar(
            select(Run.state).where(Run.job_id == job_id).order_by(Run.number.desc()).limit(1)
        )
        state = job_state(job, latest)
        raise Conflict(f"job {job_id} is {state}, not a draft: it is committed already")
    job.draft = False
    job.spec = {**job.spec, "draft": False}
    job.updated_at = now
    session.flush()
    return go_live(session, job, now)


def lock_job(session: Session, job_id: UUID) -> Job:
    """The job's row, locked until the transaction ends, or :class:`NotFound`.

    Creating a run locks the same row, so a commit, update or delete and a new run of
    the job are applied one after the other.
    """
    job = session.scalars(select(Job).where(Job.id == job_id).with_for_update()).one_or_none()
    if job is None:
        raise NotFound("job", job_id)
    return job


def unfinished_run(session: Session, job_id: UUID) -> tuple[UUID, str] | None:
    """The id and state of the job's oldest run that has not finished, if any."""
    row = session.execute(
        select(Run.id, Run.state)
        .where(Run.job_id == job_id, Run.state.in_([state.value for state in RUN_UNFINISHED]))
        .order_by(Run.number).limit(1)
    ).one_or_none()
    return None if row is None else (row[0], row[1])


def delete_job(
    session: Session, job_id: UUID, *, force: bool, cancel_run: Callable[[UUID], None],
    now: datetime | None = None, request_id: str | None = None,
) -> None:
    """Delete the job with its runs, task runs, journal, logs and storage (FK cascades).

    Its subscriptions are deleted in the same transaction, each announced by a
    ``subscription.deleted`` event after the job's ``job.deleted`` (both with
    ``request_id``, for a queued request), recorded for the notify runner.

    An unfinished run is a :class:`Conflict` unless ``force``: then each is canceled
    first by ``cancel_run`` (the engine's path, in its own transaction, which also
    tells running attempts to stop), and deleted with the job. A run that finishes or
    is already canceling meanwhile needs no cancel.
    """
    if force:
        for run_id in _runs_to_cancel(session, job_id):
            with contextlib.suppress(Conflict, NotFound):
                cancel_run(run_id)
    job = lock_job(session, job_id)
    unfinished = None if force else unfinished_run(session, job_id)
    if unfinished is not None:
        run_id, state = unfinished
        raise Conflict(
            f"job {job_id} has an unfinished run {run_id} ({state}): cancel it, or delete "
            "with ?force=true to cancel its unfinished runs"
        )
    now = now or utcnow()
    announce(session, job_event("job.deleted", job, now, request_id=request_id))
    extra = None if request_id is None else {"request_id": request_id}
    delete_job_subscriptions(session, job_id, now=now, event_extra=extra)
    session.execute(delete(Job).where(Job.id == job_id))


def _runs_to_cancel(session: Session, job_id: UUID) -> list[UUID]:
    states = [state.value for state in RUN_UNFINISHED - {RunState.CANCEL_REQUESTED}]
    return list(session.scalars(
        select(Run.id).where(Run.job_id == job_id, Run.state.in_(states)).order_by(Run.number)
    ))
