"""A job's graph and task definitions as the engine needs them, cached per version.

The structure of a job only changes with its ``version``, so an engine keeps it in
memory instead of reading every task row for every batch of a 10,000-task run.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from psycopg import Connection as PgConnection

from common.domain.flow_spec import FlowNeeds
from common.domain.graph import Graph
from common.domain.snapshot import TaskInfo
from common.persistence.arrays import literal
from common.persistence.queries import LOAD_EDGES, LOAD_JOBS, LOAD_TASKS

# Distinct ``tasks.flow`` texts kept parsed (a job's tasks mostly share one).
FLOW_TEXTS_CACHED = 4096


@dataclass(frozen=True)
class TaskDef:
    """One task's definition: what a dispatch message is built from."""

    id: uuid.UUID
    name: str
    type: str
    params: dict[str, Any]
    # Sealed as stored: the engine never opens secure params, the worker does.
    sealed_secure_params: str | None
    timeout_s: float
    info: TaskInfo
    # A task of a registered worker type: where and how its attempts are dispatched
    # (``scheduler.services.task_binding``); None for every other task.
    binding: dict[str, Any] | None = None
    # 9 first, 0 last; and the keys flow control holds its attempts by (issue 16).
    priority: int = 5
    flow: FlowNeeds = FlowNeeds()


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
    sealed_secure_params: str | None
    canary: bool
    failure_threshold: float
    timeout: timedelta | None
    graph: Graph
    tasks: dict[str, TaskDef]
    # When a started run is suspended (``scheduler.beat.suspension``): at a date, or
    # a duration after its start.
    suspend_at: datetime | None = None
    suspend_after: timedelta | None = None

    @functools.cached_property
    def flow_controlled(self) -> bool:
        """Whether a task of the job states a concurrency key or a rate (issue 16)."""
        return any(t.flow.asks for t in self.tasks.values())

    @property
    def infos(self) -> dict[str, TaskInfo]:
        """Task infos by name, for the state machine."""
        return {name: task.info for name, task in self.tasks.items()}


class StructureCache:
    """Job structures by id, reloaded when the job's version changes."""

    def __init__(self) -> None:
        self._cache: dict[uuid.UUID, JobStructure] = {}

    def get_many(
        self, conn: PgConnection[Any], versions: dict[uuid.UUID, int],
    ) -> dict[uuid.UUID, JobStructure]:
        """The structures of the jobs at the given versions; the missing read together.

        The caller reads each version with the run it locks, so a hit costs no query,
        and the misses of a whole batch (a tick of cron fires: hundreds of jobs) cost
        three queries, not three per job.
        """
        found = {job_id: self._cache.get(job_id) for job_id in versions}
        missing = [job_id for job_id, s in found.items()
                   if s is None or s.version != versions[job_id]]
        for structure in load_structures(conn, missing):
            self._cache[structure.id] = found[structure.id] = structure
        return {job_id: s for job_id, s in found.items() if s is not None}


def load_structures(conn: PgConnection[Any], job_ids: list[uuid.UUID]) -> list[JobStructure]:
    """Read jobs, their tasks and edges: three queries in one round trip.

    Whatever the number of jobs: each fire of a cron job the engine has not seen yet
    (a new engine, or a job's new version) asks for its structure.
    """
    if not job_ids:
        return []
    ids = literal(job_ids)
    with conn.pipeline():
        task_rows = conn.execute(LOAD_TASKS, (ids,))
        edge_rows = conn.execute(LOAD_EDGES, (ids,))
        job_rows = conn.execute(LOAD_JOBS, (ids,))
    tasks: dict[uuid.UUID, list[TaskDef]] = {job_id: [] for job_id in job_ids}
    for row in task_rows.fetchall():
        tasks[row[0]].append(_task_def(row[1:]))
    edges: dict[uuid.UUID, list[tuple[uuid.UUID, uuid.UUID]]] = {}
    for job_id, from_task, to_task in edge_rows.fetchall():
        edges.setdefault(job_id, []).append((from_task, to_task))
    return [_structure(row, tasks[row[0]], edges.get(row[0], [])) for row in job_rows.fetchall()]


def _structure(
    row: Any, task_defs: list[TaskDef], edges: list[tuple[uuid.UUID, uuid.UUID]],
) -> JobStructure:
    job_id, version, name, job_type, application, tenant, params, secure, spec = row
    names = {t.id: t.name for t in task_defs}
    successors: dict[str, list[str]] = {t.name: [] for t in task_defs}
    for from_task, to_task in edges:
        successors[names[from_task]].append(names[to_task])
    graph = Graph.build((t.name, t.type, successors[t.name]) for t in task_defs)
    timeout = spec.get("timeout")
    return JobStructure(
        id=job_id, version=version, name=name, type=job_type, application=application,
        tenant=tenant, params=params, sealed_secure_params=secure,
        canary=bool(spec.get("canary", False)),
        failure_threshold=float(spec.get("failure_threshold", 0.0)),
        timeout=timedelta(seconds=float(timeout)) if timeout is not None else None,
        graph=graph, tasks={t.name: t for t in task_defs},
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


def _task_def(row: Any) -> TaskDef:
    """A task row of :data:`LOAD_TASKS` (without its job id)."""
    task_id, name, task_type, params, secure, timeout_s, retries, retry_backoff_s, confirm = row[:9]
    info = TaskInfo(
        type=task_type, retries=retries, retry_backoff=timedelta(seconds=retry_backoff_s),
        confirm=confirm,
    )
    return TaskDef(task_id, name, task_type, params, secure, timeout_s, info, binding=row[9],
                   priority=row[10], flow=flow_needs(row[11]))


@functools.lru_cache(maxsize=FLOW_TEXTS_CACHED)
def flow_needs(text: str | None) -> FlowNeeds:
    """A task's rendered keys from the text of its ``tasks.flow`` (``own`` left out).

    A fan-out's tasks share their keys: read as JSON, every row of 10,000 cost ~15 µs
    of loading and ~5 of parsing, a quarter of loading the whole job. As text, each
    distinct one is parsed once; the result is immutable and shared.
    """
    return FlowNeeds.from_json(None if text is None else orjson.loads(text))
