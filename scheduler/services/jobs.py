"""Creating a job: its definition, task graph and storage, and its run when it has one."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session

from common.domain.flow_spec import has_variables
from common.domain.spec import JobSpec, TaskSpec
from common.domain.states import RunState
from common.persistence.arrays import literals
from common.persistence.db import driver
from common.persistence.json_text import json_text
from common.persistence.models import Job
from common.persistence.queries import (
    CREATED_TASK_COLUMNS,
    INSERT_JOB,
    INSERT_TASK_EDGES,
    JOB_COLUMNS,
)
from common.secure_params import NoSecretKey, SecretBox
from scheduler.services.errors import InvalidInput
from scheduler.services.job_events import announce, job_event
from scheduler.services.job_lifecycle import LiveJob, go_live, next_fire_at
from scheduler.services.job_names import name_holder, name_taken
from scheduler.services.job_queries import job_state
from scheduler.services.schedules import check_schedule
from scheduler.services.task_binding import BoundTask, bind_tasks

# Kept out of ``jobs.spec``: tasks and storage have tables, secrets must not be readable
# (``webservice`` is kept without its header values, see ``spec_column``).
SPEC_COLUMN_EXCLUDE = frozenset({"tasks", "secure_params", "storage", "webservice"})

# The ``tasks`` columns that hold JSON (sent as its text, cast by ``INSERT_JOB``) and the
# ``jobs`` ones (psycopg needs them wrapped).
_TASK_JSON_COLUMNS = frozenset({"params", "binding", "flow"})
_JOB_JSON_COLUMNS = frozenset({"labels", "params", "spec", "schedule"})


@dataclass(frozen=True)
class CreatedJob:
    """The new job, its run if one was created, and the outbox rows to relay after commit."""

    job_id: UUID
    run_id: UUID | None
    outbox_ids: list[int]


def create_job(
    session: Session, spec: JobSpec, now: datetime, secrets: SecretBox | None = None,
    *, request_id: str | None = None,
) -> CreatedJob:
    """Insert the job, its tasks, edges and storage; schedule it unless it is a draft.

    Drafts get nothing scheduled until committed; then :func:`go_live` does what it
    does here (a one-off job's run, a cron job's ``next_fire_at``). Secure params are
    stored sealed with ``secrets``; without it a job that has any is refused (422).
    The ``job.created`` event (with ``request_id``, for a queued request) is written
    last, so that it can name a one-off job's run.
    """
    check_schedule(spec.schedule)
    secrets = secrets or SecretBox(None)
    job = _job_row(spec, now, secrets)
    # Before the row is written: the object is no Session's (the row goes in as plain
    # SQL), so what ``go_live`` would set on it later would not be kept.
    job.next_fire_at = next_fire_at(job, now)
    _insert_job(session, job, spec, secrets)
    live = LiveJob(None, []) if spec.draft else go_live(session, job, now)
    state = job_state(job, RunState.READY if live.run_id else None)
    event = job_event(
        "job.created", job, now, state=state, run_id=live.run_id, request_id=request_id
    )
    announce(session, event)
    return CreatedJob(job.id, live.run_id, live.outbox_ids)


def _job_row(spec: JobSpec, now: datetime, secrets: SecretBox) -> Job:
    return Job(
        id=uuid4(), name=spec.name, description=spec.description,
        application=spec.application, type=spec.type, tenant=spec.tenant, owner=spec.owner,
        labels=spec.labels, priority=spec.priority, params=spec.params,
        secure_params=secret_text(spec.secure_params, secrets, ("body", "secure_params")),
        sealed_webservice_headers=webservice_headers(spec, secrets),
        spec=spec_column(spec),
        schedule=spec.schedule.model_dump(mode="json"), draft=spec.draft,
        max_active_runs=spec.max_active_runs,
        enabled=spec.enabled, version=1, created_at=now, updated_at=now,
    )


def _insert_job(session: Session, job: Job, spec: JobSpec, secrets: SecretBox) -> None:
    """The job's rows, its tasks' and edges'; :class:`Conflict` if its tenant has the name."""
    ids = {task.name: uuid4() for task in spec.tasks}
    values = [_job_value(column, getattr(job, column)) for column in JOB_COLUMNS]
    tasks = _task_columns(_task_rows(session, job.id, spec, secrets, ids))
    row = driver(session).execute(INSERT_JOB, (
        *values, Jsonb(spec.storage), job.updated_at, *literals(tasks),
        *literals(_edge_columns(spec, ids)), job.tenant, job.name,
    )).fetchone()
    assert row is not None
    created, holder = row
    if created is None:
        holder = holder or name_holder(session, job.tenant, job.name)
        raise name_taken(job.tenant, job.name, holder)


def spec_column(spec: JobSpec) -> dict[str, Any]:
    """What ``jobs.spec`` keeps: the settings as given, ``webservice`` headers by name only."""
    column = spec.model_dump(mode="json", exclude=set(SPEC_COLUMN_EXCLUDE))
    if spec.webservice is not None:
        column["webservice"] = {"url": spec.webservice.url,
                                "headers": sorted(spec.webservice.headers)}
    return column


def webservice_headers(spec: JobSpec, secrets: SecretBox) -> str | None:
    """The job's ``webservice`` header values, sealed like secure params."""
    headers = spec.webservice.headers if spec.webservice is not None else None
    return secret_text(headers, secrets, ("body", "webservice", "headers"))


def _task_rows(
    session: Session, job_id: UUID, spec: JobSpec, secrets: SecretBox, ids: Mapping[str, UUID],
) -> list[dict[str, Any]]:
    bound = bind_tasks(session, spec, secrets)
    flows = FlowColumns(spec)
    return [
        task_row(task, ids[task.name], job_id, position, spec, secrets=secrets,
                 bound=bound.get(task.name), flows=flows)
        for position, task in enumerate(spec.tasks)
    ]


def _task_columns(rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """The task rows as ``CREATED_TASK_COLUMNS``' arrays for :data:`INSERT_JOB`.

    JSON as its text; a ``flow`` shared by rows (:class:`FlowColumns`) is dumped once.
    """
    dumped: dict[int, str | None] = {}

    def text(value: Any) -> str | None:
        if value is None:
            return None
        if id(value) not in dumped:
            dumped[id(value)] = json_text(value)
        return dumped[id(value)]

    return [[text(row[c]) for row in rows] if c in _TASK_JSON_COLUMNS else [row[c] for row in rows]
            for c in CREATED_TASK_COLUMNS]


def insert_edges(session: Session, job_id: UUID, spec: JobSpec, ids: Mapping[str, UUID]) -> None:
    """The job's edges, each task to the tasks of its ``next`` (once each)."""
    edges = _edge_columns(spec, ids)
    if edges[0]:
        session.flush()
        driver(session).execute(INSERT_TASK_EDGES, (job_id, *literals(edges)))


def _edge_columns(spec: JobSpec, ids: Mapping[str, UUID]) -> tuple[list[UUID], list[UUID]]:
    """The edges' tasks from and to, each task to the tasks of its ``next`` (once each)."""
    froms: list[UUID] = []
    tos: list[UUID] = []
    for task in spec.tasks:
        for successor in dict.fromkeys(task.next):
            froms.append(ids[task.name])
            tos.append(ids[successor])
    return froms, tos


def _job_value(column: str, value: Any) -> Any:
    """A ``jobs`` value as ``INSERT_JOB`` takes it: a JSON column's value wrapped as such."""
    return Jsonb(value) if column in _JOB_JSON_COLUMNS and value is not None else value


def task_row(
    task: TaskSpec, task_id: UUID, job_id: UUID, position: int, spec: JobSpec,
    *, secrets: SecretBox, bound: BoundTask | None = None, flows: FlowColumns | None = None,
) -> dict[str, Any]:
    """The task's own settings, else the job's task defaults (and the job's priority).

    A task of a registered worker type (``bound``) falls back to its type's template
    first, and keeps its dispatch in ``binding``. ``flows``: the spec's, shared by the
    rows of one write.
    """
    defaults = spec.task_defaults if bound is None else bound.defaults
    where = ("body", "tasks", position, "secure_params")
    return {
        "id": task_id, "job_id": job_id, "position": position, "name": task.name,
        "type": task.type, "params": task.params,
        "secure_params": secret_text(task.secure_params, secrets, where),
        "timeout_s": _seconds(task.timeout, defaults.timeout),
        "retries": defaults.retries if task.retries is None else task.retries,
        "retry_backoff_s": _seconds(task.retry_backoff, defaults.retry_backoff),
        "confirm": task.confirm,
        "priority": spec.priority if task.priority is None else task.priority,
        "binding": None if bound is None else bound.column,
        "flow": (flows or FlowColumns(spec))(task),
    }


class FlowColumns:
    """``tasks.flow`` of one spec's tasks, each distinct setting without variables once.

    A fan-out's tasks mostly state the same keys: built for each of 10,000 tasks, the
    column (the settings dumped by pydantic, the keys rendered) cost 10-35 µs a task.
    A key with variables (``{task}``, ``{params.region}``) is rendered for every task;
    whether a setting has any is decided once per setting too. The value is shared
    between rows: it is only written, never changed.
    """

    def __init__(self, spec: JobSpec) -> None:
        self._spec = spec
        # By the task's own settings (which, with the spec's defaults, decide its keys):
        # the shared column, or None when its keys have variables.
        self._built: dict[Hashable, tuple[dict[str, Any] | None] | None] = {}

    def __call__(self, task: TaskSpec) -> dict[str, Any] | None:
        """The column of ``task``."""
        own = _own_flow(task)
        if own not in self._built:
            self._built[own] = (None if self._has_variables(task)
                                else (flow_column(task, self._spec),))
        built = self._built[own]
        return flow_column(task, self._spec) if built is None else built[0]

    def _has_variables(self, task: TaskSpec) -> bool:
        concurrency, rate = self._spec.flow_settings(task)
        templates = [c.key for c in concurrency or ()] + ([rate.key] if rate else [])
        return any(map(has_variables, templates))


def _own_flow(task: TaskSpec) -> Hashable:
    """The task's own concurrency and rate settings, as a key."""
    return (None if task.concurrency is None
            else tuple((c.key, c.limit) for c in task.concurrency),
            None if task.rate is None else (task.rate.key, task.rate.limit, task.rate.per))


def flow_column(task: TaskSpec, spec: JobSpec) -> dict[str, Any] | None:
    """``tasks.flow``: the rendered keys the engine reads, and the task's own settings.

    The own settings (as written, None: the job's default) rebuild the spec on a patch.
    """
    own = task.model_dump(mode="json", include={"concurrency", "rate"})
    needs = spec.flow_needs(task).to_json()
    if needs is None and not any(own.values()):
        return None
    return {**(needs or {}), "own": own}


def _seconds(value: timedelta | None, default: timedelta) -> float:
    return (default if value is None else value).total_seconds()


def secret_text(
    value: dict[str, Any] | None, secrets: SecretBox, loc: tuple[str | int, ...]
) -> str | None:
    """Secure params as they are stored: sealed (never in ``jobs.spec``, never returned).

    Nothing to keep (``None`` or ``{}``) is stored as NULL, so a server without a secret
    key still takes jobs without secrets; one with secrets is refused there (422 at
    ``loc``) rather than stored readable.
    """
    if not value:
        return None
    try:
        return secrets.seal(value)
    except NoSecretKey as error:
        raise InvalidInput(loc, f"cannot be stored: {error}") from error
