"""Tenant isolation: a tenant-bound caller sees only its tenant's jobs and runs.

The rules: docs/decisions.md, "Tokens, scopes and tenants".

Every route that names a job or a run calls :func:`visible_job` or :func:`visible_run`
before it reads or acts; an object of another tenant is :class:`NotFound` with the same
message as one that does not exist, so ids of other tenants cannot be probed. A job's
tenant never changes (it is not patchable) and a run never changes its job, so a check
before the action holds for the action too.
"""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.persistence.models import Job, Run
from scheduler.services.errors import NotFound


def visible_job(session: Session, job_id: UUID, tenant: str | None) -> None:
    """:class:`NotFound` unless the job exists and belongs to ``tenant`` (None: any)."""
    if tenant is None:
        return
    found = session.scalar(select(Job.tenant).where(Job.id == job_id))
    if found != tenant:
        raise NotFound("job", job_id)


def visible_run(session: Session, run_id: UUID, tenant: str | None) -> None:
    """:class:`NotFound` unless the run exists and its job belongs to ``tenant`` (None: any)."""
    if tenant is None:
        return
    found = session.scalar(
        select(Job.tenant).join(Run, Run.job_id == Job.id).where(Run.id == run_id)
    )
    if found != tenant:
        raise NotFound("run", run_id)
