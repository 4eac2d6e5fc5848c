"""Changing a job (``PATCH /jobs/{id}``): validated like a create, applied in one transaction.

A run reads its job's definition (tasks, params, canary...) while it goes on: the
engine caches it per job ``version`` and reloads it when the version moves. So the
definition may change only while no run of the job is unfinished (else 409 naming the
run); a run always finishes with the definition it started with. Everything else
(name, labels, schedule, ``enabled``...) may change at any time. Every PATCH bumps
``version``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from common.domain.patch import DEFINITION_FIELDS, TASK_FIELDS, JobPatch
from common.domain.spec import JobSpec, TaskDefaults, TaskSpec
from common.persistence.models import Job, Task, TaskEdge
from common.secure_params import SecretBox, SecretKeyError
from scheduler.services.errors import Conflict
from scheduler.services.job_lifecycle import lock_job, next_fire_at, unfinished_run
from scheduler.services.job_names import rename
from scheduler.services.job_queries import TaskView, read_job
from scheduler.services.jobs import (
    FlowColumns,
    insert_edges,
    secret_text,
    spec_column,
    task_row,
    webservice_headers,
)
from scheduler.services.schedules import check_schedule
from scheduler.services.task_binding import bind_tasks, bound_defaults


def update_job(
    session: Session, job_id: UUID, patch: JobPatch, now: datetime, secrets: SecretBox
) -> None:
    """Apply ``patch``; pydantic's ``ValidationError`` or a service error changes nothing.

    The job's secure params are opened and sealed again (a new IV), so the API needs
    the same secret key as the one that wrote them.
    """
    job = lock_job(session, job_id)
    tasks = read_job(session, job_id).tasks
    current = stored_spec(job, tasks, secrets)
    spec = patch.apply(current)
    if "schedule" in patch.given():
        check_schedule(spec.schedule)
    _check_allowed(session, job, patch, current, spec)
    if spec.name != job.name:
        rename(session, job, spec.name)
    rescheduled = _rescheduled(job, spec)
    _write_job(job, spec, now, secrets)
    if rescheduled:
        job.next_fire_at = next_fire_at(job, now)
    if patch.given() & TASK_FIELDS:
        session.flush()
        existing = {view.task.name: view.task.id for view in tasks}
        _replace_tasks(session, job, spec, existing, secrets)


def stored_spec(job: Job, tasks: list[TaskView], secrets: SecretBox) -> JobSpec:
    """The job's spec rebuilt from its rows.

    Task rows hold effective settings; a value equal to the job's default is read back
    as "not set", so that a later change of the defaults reaches it.
    """
    defaults = TaskDefaults.model_validate(job.spec.get("task_defaults", {}))
    fields = {
        **job.spec, "name": job.name, "description": job.description,
        "application": job.application, "type": job.type, "tenant": job.tenant,
        "owner": job.owner, "labels": job.labels, "priority": job.priority,
        "params": job.params, "secure_params": _opened(job.secure_params, secrets),
        "schedule": job.schedule, "draft": job.draft, "enabled": job.enabled,
        "webservice": _webservice(job, secrets),
        "tasks": [_task_spec(view, defaults, job.priority, secrets) for view in tasks],
    }
    return JobSpec.model_validate(fields)


def _webservice(job: Job, secrets: SecretBox) -> dict[str, Any] | None:
    """The job's ``webservice`` settings with their header values opened."""
    stored = job.spec.get("webservice")
    if stored is None:
        return None
    return {"url": stored.get("url"), "headers": _opened(job.sealed_webservice_headers, secrets)
            or {}}


def _task_spec(
    view: TaskView, defaults: TaskDefaults, priority: int, secrets: SecretBox
) -> TaskSpec:
    task = view.task
    defaults = bound_defaults(task.binding, defaults)
    timeout = timedelta(seconds=task.timeout_s)
    backoff = timedelta(seconds=task.retry_backoff_s)
    return TaskSpec(
        name=task.name, type=task.type, params=task.params,
        secure_params=_opened(task.secure_params, secrets), next=view.next,
        timeout=None if timeout == defaults.timeout else timeout,
        retries=None if task.retries == defaults.retries else task.retries,
        retry_backoff=None if backoff == defaults.retry_backoff else backoff,
        confirm=task.confirm, priority=None if task.priority == priority else task.priority,
        **((task.flow or {}).get("own") or {}),
    )


def _opened(sealed: str | None, secrets: SecretBox) -> dict[str, Any] | None:
    """Stored secure params, opened; a key that cannot open them is a 409 naming it."""
    if sealed is None:
        return None
    try:
        return secrets.open(sealed)
    except SecretKeyError as error:
        raise Conflict(f"the job's stored {error}") from error


def _check_allowed(
    session: Session, job: Job, patch: JobPatch, current: JobSpec, spec: JobSpec
) -> None:
    """Refuse what the job's state does not allow (409); see the module docstring."""
    definition = sorted(patch.given() & DEFINITION_FIELDS)
    if definition:
        unfinished = unfinished_run(session, job.id)
        if unfinished is not None:
            run_id, state = unfinished
            raise Conflict(
                f"job {job.id} has an unfinished run {run_id} ({state}): its definition "
                f"({', '.join(definition)}) cannot change until the run has finished"
            )
    old, new = current.schedule, spec.schedule
    if not job.draft and old != new and (old.cron is None or new.cron is None):
        raise Conflict(
            f"job {job.id} is committed: its schedule may change from one cron expression "
            "to another, but not to or from a one-off date (its run exists already)"
        )


def _rescheduled(job: Job, spec: JobSpec) -> bool:
    """Whether the next fire moves: a new schedule, or the job enabled or disabled."""
    return spec.schedule.model_dump(mode="json") != job.schedule or spec.enabled != job.enabled


def _write_job(job: Job, spec: JobSpec, now: datetime, secrets: SecretBox) -> None:
    job.name, job.description, job.type, job.owner = (
        spec.name, spec.description, spec.type, spec.owner
    )
    job.labels, job.priority, job.params = spec.labels, spec.priority, spec.params
    job.max_active_runs = spec.max_active_runs
    job.secure_params = secret_text(spec.secure_params, secrets, ("body", "secure_params"))
    job.sealed_webservice_headers = webservice_headers(spec, secrets)
    job.spec = spec_column(spec)
    job.schedule = spec.schedule.model_dump(mode="json")
    job.enabled = spec.enabled
    job.version += 1
    job.updated_at = now


def _replace_tasks(
    session: Session, job: Job, spec: JobSpec, existing: dict[str, UUID], secrets: SecretBox
) -> None:
    """Rewrite the task rows and edges; a task keeps its id while its name stays.

    Kept ids keep the task runs of past runs attached; a task that left the graph is
    deleted with its task runs (the cascade of ``task_runs.task_id``).
    """
    ids = {task.name: existing.get(task.name) or uuid4() for task in spec.tasks}
    session.execute(delete(TaskEdge).where(TaskEdge.job_id == job.id))
    gone = [task_id for name, task_id in existing.items() if name not in ids]
    if gone:
        session.execute(delete(Task).where(Task.id.in_(gone)))
    bound = bind_tasks(session, spec, secrets)
    flows = FlowColumns(spec)
    rows = [task_row(task, ids[task.name], job.id, position, spec, secrets=secrets,
                     bound=bound.get(task.name), flows=flows)
            for position, task in enumerate(spec.tasks)]
    upsert = pg_insert(Task)
    columns = {name: upsert.excluded[name] for name in rows[0] if name not in {"id", "job_id"}}
    session.execute(upsert.on_conflict_do_update(index_elements=["id"], set_=columns), rows)
    insert_edges(session, job.id, spec, ids)
