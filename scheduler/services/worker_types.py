"""Registering, listing and deleting worker types (``/worker-types``).

The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".

Worker types are shared by every tenant, like the task types of processors: a
tenant-bound token may read them but not register or delete one (another tenant's
jobs would call its URL). Header values are sealed with the API's secret key and
never shown; jobs copy what they need when they are written (``task_binding``), so a
type is refused deletion (409) while a job is bound to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from psycopg.rows import dict_row
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from common.domain.worker_types import (
    BUILTIN_TYPES,
    RegisteredType,
    WorkerTemplate,
    WorkerTypeSpec,
)
from common.persistence.db import driver
from common.persistence.detached import detached
from common.persistence.models import Task, WorkerType
from common.persistence.queries import REGISTERED_TYPES
from common.secure_params import NoSecretKey, SecretBox, SecretKeyError
from scheduler.services import access
from scheduler.services.access import Principal
from scheduler.services.errors import Conflict, InvalidInput, NotFound


def require_unbound(principal: Principal) -> None:
    """:class:`Forbidden` for a tenant-bound token: worker types serve every tenant."""
    access.require_unbound(principal, "worker types", "register or delete one")


def register(
    session: Session, spec: WorkerTypeSpec, now: datetime, secrets: SecretBox, by: str,
) -> WorkerType:
    """Store a new worker type; 409 if the name is taken, 422 for headers without a key.

    The primary key decides (``ON CONFLICT DO NOTHING``), not a read before the insert,
    which two registrations of one name at once both passed: the second was a 500.
    """
    row: WorkerType | None = session.scalar(pg_insert(WorkerType).values(
        name=spec.name, engine=spec.engine, url=spec.url,
        sealed_headers=_sealed(spec.headers, secrets),
        header_names=list(spec.headers), created_by=by, created_at=now,
        job_template=spec.job_template.model_dump(mode="json", exclude_none=True),
    ).on_conflict_do_nothing(index_elements=[WorkerType.name]).returning(WorkerType))
    if row is None:
        raise Conflict(f"worker type {spec.name!r} exists already: delete it first")
    return row


def _sealed(headers: dict[str, str], secrets: SecretBox) -> str | None:
    if not headers:
        return None
    try:
        return secrets.seal(headers)
    except NoSecretKey as error:
        raise InvalidInput(("body", "headers"), f"cannot be stored: {error}") from error


def list_types(session: Session) -> list[WorkerType]:
    """Every worker type, by name."""
    return list(session.scalars(select(WorkerType).order_by(WorkerType.name)))


def get_type(session: Session, name: str) -> WorkerType:
    """One worker type, or :class:`NotFound`."""
    row = session.get(WorkerType, name)
    if row is None:
        raise NotFound("worker type", repr(name))
    return row


def delete_type(session: Session, name: str) -> None:
    """Delete a worker type no job is bound to; else 409 naming one such job."""
    row = session.get(WorkerType, name, with_for_update=True)
    if row is None:
        raise NotFound("worker type", repr(name))
    job_id = session.scalar(
        select(Task.job_id).where(Task.type == name, Task.binding.is_not(None)).limit(1)
    )
    if job_id is not None:
        raise Conflict(
            f"worker type {name!r} is used by job {job_id}: change or delete its tasks first"
        )
    session.execute(delete(WorkerType).where(WorkerType.name == name))


def registered(
    session: Session, names: Iterable[str], secrets: SecretBox,
) -> dict[str, RegisteredType]:
    """Those of ``names`` that are registered, with their headers opened (one query).

    Locked ``FOR SHARE``: a type cannot be deleted while a job is being bound to it.
    A built-in type is never registered (its name is refused), so a job of built-in
    types only, most jobs, costs no query.
    """
    wanted = set(names) - BUILTIN_TYPES
    if not wanted:
        return {}
    rows = driver(session).cursor(row_factory=dict_row).execute(REGISTERED_TYPES, (list(wanted),))
    return {row["name"]: _registered(detached(WorkerType, row), secrets) for row in rows}


def _registered(row: WorkerType, secrets: SecretBox) -> RegisteredType:
    headers: dict[str, str] = {}
    if row.sealed_headers is not None:
        try:
            headers = secrets.open(row.sealed_headers)
        except SecretKeyError as error:
            raise Conflict(f"the headers of worker type {row.name!r}: {error}") from error
    return RegisteredType(
        name=row.name, engine="http" if row.engine == "http" else "webservice", url=row.url,
        headers=headers, template=WorkerTemplate.model_validate(row.job_template),
    )
