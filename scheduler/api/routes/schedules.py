"""``/jobs/{id}/fire-times``: preview a cron job's fire times, DST changes included."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from common.domain.cron import CronError, CronSchedule
from common.persistence.models import Job
from scheduler.api.deps import JobIdDep, NowDep, PrincipalDep, SessionDep, scope
from scheduler.api.schemas import FireTimesPublic
from scheduler.services.errors import InvalidInput, NotFound
from scheduler.services.tenancy import visible_job

router = APIRouter(prefix="/jobs", tags=["schedules"])

MAX_FIRE_TIMES = 1000

After = Annotated[
    datetime | None,
    Query(description="ISO-8601 with a UTC offset; fire times strictly after it (default: now)."),
]
Count = Annotated[int, Query(ge=1, le=MAX_FIRE_TIMES, description="How many fire times.")]


@router.get("/{job_id}/fire-times", dependencies=[Depends(scope("job.read"))])
def fire_times(
    job_id: JobIdDep, session: SessionDep, now: NowDep, *, principal: PrincipalDep,
    after: After = None, count: Count = 10,
) -> FireTimesPublic:
    """The job's fire times after ``after``, in UTC; empty for a job without a cron schedule.

    The preview ignores whether the job is enabled or a draft, so a schedule can be
    checked before it goes live.
    """
    visible_job(session, job_id, principal.tenant)
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound("job", job_id)
    if after is not None and after.tzinfo is None:
        raise InvalidInput(
            ("query", "after"), "needs a UTC offset, e.g. 2027-03-27T00:00:00+01:00 or ...Z"
        )
    start = (after or now).astimezone(UTC)
    cron, zone = job.schedule.get("cron"), job.schedule.get("timezone") or "UTC"
    fires: list[datetime] = []
    if cron:
        try:
            fires = CronSchedule.parse(cron, zone).fires_after(start, count)
        except CronError as error:
            raise InvalidInput(("path", "job_id"), f"the job's schedule is unusable: {error}") \
                from error
    return FireTimesPublic(job_id=job.id, cron=cron, timezone=zone, after=start, fire_times=fires)
