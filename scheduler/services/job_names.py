"""Jobs by name: a name names one job of its tenant (issue 17).

Every route and command that takes a job takes its id or its name. A name is looked
for in the caller's tenant; a token bound to no tenant finds it in whichever tenant has
it, and is told to use the id where several do. Creating (or renaming to) a name its
tenant already uses is a 409 that names the job holding it.
"""

from __future__ import annotations

from uuid import UUID

from psycopg.errors import UniqueViolation
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from common.persistence.db import driver
from common.persistence.models import Job
from common.persistence.queries import JOB_NAMED
from scheduler.services.errors import Conflict, NotFound

# The unique index that makes a name one job's in its tenant.
NAME_INDEX = "uq_jobs_tenant_name"


def job_id_of(session: Session, ref: str, tenant: str | None) -> UUID:
    """The id of the job ``ref`` names: an id as it is, else the job of that name.

    A job of another tenant is not found, with the message of one that does not exist.
    """
    try:
        return UUID(ref)
    except ValueError:
        pass
    query = select(Job.id, Job.tenant).where(Job.name == ref)
    if tenant is not None:
        query = query.where(Job.tenant == tenant)
    found = session.execute(query.limit(10)).all()
    if not found:
        raise NotFound("job", repr(ref))
    if len(found) > 1:
        tenants = ", ".join(sorted(repr(row.tenant) for row in found))
        raise Conflict(f"several tenants have a job named {ref!r} ({tenants}): "
                       "name the job by its id, or use a token bound to its tenant")
    return UUID(str(found[0].id))


def rename(session: Session, job: Job, name: str) -> None:
    """Give ``job`` the name ``name``; :class:`Conflict` if another job of its tenant has it.

    The unique index decides, not a read before the write: a read cannot see a job of
    that name whose create is not committed yet, and the commit would then meet the
    unique violation (a 500). Written in a savepoint (``begin_nested`` flushes the
    changes pending before it), so that the transaction can still name the holder.
    """
    tenant = job.tenant
    try:
        with session.begin_nested():
            job.name = name
            session.flush()
    except IntegrityError as error:
        if not isinstance(error.orig, UniqueViolation) or \
                error.orig.diag.constraint_name != NAME_INDEX:
            raise
        raise name_taken(tenant, name, name_holder(session, tenant, name)) from error


def name_holder(session: Session, tenant: str, name: str) -> UUID | None:
    """The id of the job of ``tenant`` named ``name``, if there is one."""
    row = driver(session).execute(JOB_NAMED, (tenant, name)).fetchone()
    return None if row is None else UUID(str(row[0]))


def name_taken(tenant: str, name: str, holder: UUID | None) -> Conflict:
    """The 409 of a create or rename to a name that ``holder`` has in ``tenant``."""
    where = f" in tenant {tenant!r}" if tenant else ""
    return Conflict(
        f"a job named {name!r} exists{where} (id {holder}): change it with "
        f"`stellwerk apply` (PUT /jobs/{name}), or give this one another name")
