"""Jobs as code: make the job of a spec's name what the spec says (``PUT /jobs/{name}``).

``stellwerk apply`` sends each file's spec here. A name its tenant does not use yet is a
new job; otherwise the stored job is compared with the spec (``common.domain.spec_diff``)
and what differs is applied as a ``PATCH`` would, nothing when nothing does: applying a
file twice changes nothing the second time (no new version, no new run). A dry run
answers the same changes and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.patch import JobPatch
from common.domain.spec import JobSpec
from common.domain.spec_diff import IDENTITY, Change, keep_unsent_secrets, spec_changes
from common.persistence.models import Job
from common.secure_params import SecretBox
from scheduler.services.errors import Conflict
from scheduler.services.job_lifecycle import lock_job
from scheduler.services.job_queries import read_job
from scheduler.services.job_update import stored_spec, update_job
from scheduler.services.jobs import create_job

Action = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class Applied:
    """What applying a spec did (or, in a dry run, would do)."""

    action: Action
    changes: list[Change]
    job_id: UUID | None = None
    run_id: UUID | None = None
    outbox_ids: list[int] = field(default_factory=list)


def apply_job(
    session: Session, spec: JobSpec, now: datetime, secrets: SecretBox, *, dry_run: bool,
) -> Applied:
    """Create the job named ``spec.name`` in ``spec.tenant``, or change it to ``spec``.

    Raises what a create or a ``PATCH`` raises (a definition change under an unfinished
    run is a :class:`Conflict` naming the run), and :class:`Conflict` for a change of
    ``application``, which no change may make.
    """
    job_id = session.scalar(select(Job.id).where(Job.tenant == spec.tenant,
                                                 Job.name == spec.name))
    if job_id is None:
        return _create(session, spec, now, secrets, dry_run=dry_run)
    job = lock_job(session, job_id)
    stored = stored_spec(job, read_job(session, job_id).tasks, secrets)
    wanted = keep_unsent_secrets(stored, spec)
    changes = spec_changes(stored, wanted)
    fields = {change.field for change in changes}
    if fields & IDENTITY:
        raise Conflict(f"{', '.join(sorted(fields & IDENTITY))} of job {spec.name!r} cannot "
                       "change: delete the job and apply the spec again, or keep the value")
    if changes and not dry_run:
        patch = JobPatch.model_validate(wanted.model_dump(include=fields))
        update_job(session, job_id, patch, now, secrets)
    return Applied("updated" if changes else "unchanged", changes, job_id)


def _create(
    session: Session, spec: JobSpec, now: datetime, secrets: SecretBox, *, dry_run: bool,
) -> Applied:
    changes = spec_changes(_nothing(spec), spec)
    if dry_run:
        return Applied("created", changes)
    created = create_job(session, spec, now, secrets)
    return Applied("created", changes, created.job_id, created.run_id, created.outbox_ids)


def _nothing(spec: JobSpec) -> JobSpec:
    """A job of default settings and no tasks: a new job's changes are what it sets."""
    return JobSpec.model_construct(name=spec.name, tenant=spec.tenant, tasks=[])
