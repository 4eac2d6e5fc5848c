"""Jobs by name: a name names one job of its tenant (issue 17).

Every route and command that takes a job takes its id or its name. A name is looked
for in the caller's tenant; a token bound to no tenant finds it in whichever tenant has
it, and is told to use the id where several do. Creating (or renaming to) a name its
tenant already uses is a 409 that names the job holding it.
"""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.persistence.db import driver
from common.persistence.models import Job
from common.persistence.queries import JOB_NAMED
from scheduler.services.errors import Conflict, NotFound


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


def check_name_free(
    session: Session, tenant: str, name: str, job_id: UUID | None = None,
) -> None:
    """:class:`Conflict` if another job of ``tenant`` is named ``name``."""
    row = driver(session).execute(JOB_NAMED, (tenant, name)).fetchone()
    holder = None if row is None else row[0]
    if holder is not None and holder != job_id:
        where = f" in tenant {tenant!r}" if tenant else ""
        raise Conflict(
            f"a job named {name!r} exists{where} (id {holder}): change it with "
            f"`stellwerk apply` (PUT /jobs/{name}), or give this one another name")
