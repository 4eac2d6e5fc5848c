"""A job's graph and task definitions as the engine needs them, cached per version.

The structure of a job only changes with its ``version``, so an engine keeps it in
memory instead of reading every task row for every batch of a 10,000-task run.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.graph import Graph
from common.domain.snapshot import TaskInfo
from common.persistence.models import Job, Task, TaskEdge


@dataclass(frozen=True)
class TaskDef:
    """One task's definition: what a dispatch message is built from."""

    id: uuid.UUID
    name: str
    type: str
    params: dict[str, Any]
    secure_params: dict[str, Any]
    timeout_s: float
    info: TaskInfo


@dataclass(frozen=True)
class JobStructure:
    """Everything static about a job that runs of it need."""

    id: uuid.UUID
    version: int
    name: str
    type: str
    application: str
    tenant: str
    params: dict[str, Any]
    secure_params: dict[str, Any]
    canary: bool
    failure_threshold: float
    timeout: timedelta | None
    graph: Graph
    tasks: dict[str, TaskDef]
    last_success_start: datetime | None
    last_success_finish: datetime | None
    # When a started run is suspended (``scheduler.beat.suspension``): at a date, or
    # a duration after its start.
    suspend_at: datetime | None = None
    suspend_after: timedelta | None = None

    @property
    def infos(self) -> dict[str, TaskInfo]:
        """Task infos by name, for the state machine."""
        return {name: task.info for name, task in self.tasks.items()}


class StructureCache:
    """Job structures by id, reloaded when the job's version changes."""

    def __init__(self) -> None:
        self._cache: dict[uuid.UUID, JobStructure] = {}

    def get(
        self, session: Session, job_id: uuid.UUID, version: int,
        last_success_start: datetime | None,
    ) -> JobStructure:
        """The structure of ``job_id`` at ``version``, from memory when it is cached.

        The caller reads the version (and the last success, which dispatches carry) with
        the run it locks, so a cache hit costs no query.
        """
        cached = self._cache.get(job_id)
        if (
            cached is not None and cached.version == version
            and cached.last_success_start == last_success_start
        ):
            return cached
        structure = load_structure(session, job_id)
        self._cache[job_id] = structure
        return structure


def load_structure(session: Session, job_id: uuid.UUID) -> JobStructure:
    """Read a job, its tasks and edges."""
    job = session.get_one(Job, job_id)
    rows = session.scalars(select(Task).where(Task.job_id == job_id).order_by(Task.position))
    tasks = {t.name: _task_def(t) for t in rows}
    names = {t.id: t.name for t in tasks.values()}
    successors: dict[str, list[str]] = {name: [] for name in tasks}
    for edge in session.scalars(select(TaskEdge).where(TaskEdge.job_id == job_id)):
        successors[names[edge.from_task]].append(names[edge.to_task])
    graph = Graph.build((t.name, t.type, successors[t.name]) for t in tasks.values())
    spec = job.spec
    timeout = spec.get("timeout")
    return JobStructure(
        id=job.id, version=job.version, name=job.name, type=job.type,
        application=job.application, tenant=job.tenant, params=job.params,
        secure_params=json.loads(job.secure_params) if job.secure_params else {},
        canary=bool(spec.get("canary", False)),
        failure_threshold=float(spec.get("failure_threshold", 0.0)),
        timeout=timedelta(seconds=float(timeout)) if timeout is not None else None,
        graph=graph, tasks=tasks,
        last_success_start=job.last_success_start, last_success_finish=job.last_success_finish,
        suspend_at=_date(spec.get("suspend_at")), suspend_after=_seconds(spec.get("suspend_after")),
    )


def _date(value: str | None) -> datetime | None:
    """A date of the spec; one written without an offset is taken as UTC."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _seconds(value: float | None) -> timedelta | None:
    return timedelta(seconds=float(value)) if value is not None else None


def _task_def(task: Task) -> TaskDef:
    info = TaskInfo(
        type=task.type, retries=task.retries,
        retry_backoff=timedelta(seconds=task.retry_backoff_s), confirm=task.confirm,
    )
    secure = json.loads(task.secure_params) if task.secure_params else {}
    return TaskDef(task.id, task.name, task.type, task.params, secure, task.timeout_s, info)
