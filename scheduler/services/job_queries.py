"""Reading jobs: one job with its graph, and filtered, keyset-paginated lists.

A job's displayed state is its latest run's state (docs/decisions.md, "Bad input,
limits, lists, metrics"); a job without a run is NEW (a draft, or a one-off job not
committed). A cron job between runs shows what it waits for, not how its last run
ended (issue 17): SCHEDULED (its next fire) or, disabled, DISABLED.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session

from common.domain.states import RUN_TERMINAL, RunState
from common.persistence.db import driver
from common.persistence.detached import detached
from common.persistence.models import Job, Run, Task
from common.persistence.queries import LIST_JOBS, LIST_JOBS_WHERE, READ_JOB
from scheduler.services.errors import NotFound
from scheduler.services.pages import Page, decode_time_and_id, encode_time_and_id, page_rows

# What ``GET /jobs?state=`` accepts: a run state, or what a job without runs shows.
JobStateName = Literal[
    "NEW", "SCHEDULED", "DISABLED", "READY", "ACTIVE", "CONFIRM", "PAUSE_REQUESTED", "PAUSED",
    "CANCEL_REQUESTED", "CANCELED", "COMPLETED", "FAILED", "TIMEOUT",
]


@dataclass(frozen=True)
class JobSummary:
    """A job row with what its runs say about it."""

    job: Job
    state: str
    run_id: UUID | None  # the first run: the one run of a one-off job
    latest_run_id: UUID | None
    latest: Run | None = None  # the latest run itself (its number, times)


@dataclass(frozen=True)
class TaskView:
    """A task with the names of its successors, in task order."""

    task: Task
    next: list[str]


@dataclass(frozen=True)
class JobDetail:
    """A job with its task graph and storage."""

    summary: JobSummary
    tasks: list[TaskView]
    storage: dict[str, Any]


@dataclass(frozen=True)
class JobFilter:
    """Filters of ``GET /jobs``; ``labels`` must all match, ``name`` is a substring."""

    type: str | None = None
    application: str | None = None
    tenant: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    states: tuple[str, ...] = ()  # any of these displayed states
    name: str | None = None  # a part of the name, any case (the web UI's search box)


def read_job(session: Session, job_id: UUID) -> JobDetail:
    """The job with its tasks (in position order) and storage, or :class:`NotFound`.

    Plain SQL, one round trip, detached objects: every write and read of a job ends
    here (a change and an apply read the stored tasks with it). Through the ORM the same
    took four queries whose compilation and loading cost the API more CPU than
    PostgreSQL spent answering them. The objects are in no session: to show and to
    compare, not to change (``lock_job`` gives the job to change).
    """
    row = driver(session).cursor(row_factory=dict_row).execute(READ_JOB, (job_id,)).fetchone()
    return job_detail(job_id, row)


async def read_job_async(conn: AsyncConnection[Any], job_id: UUID) -> JobDetail:
    """:func:`read_job` on an async connection: the API's reads run on its event loop."""
    cursor = await conn.cursor(row_factory=dict_row).execute(READ_JOB, (job_id,))
    return job_detail(job_id, await cursor.fetchone())


def job_detail(job_id: UUID, row: dict[str, Any] | None) -> JobDetail:
    """A :data:`READ_JOB` row as a detached detail."""
    if row is None:
        raise NotFound("job", job_id)
    storage, tasks, edges = row.pop("storage"), row.pop("tasks") or [], row.pop("edges")
    successors = _successors(tasks, edges or ())
    return JobDetail(job_summary(row), [_task_view(task, successors[task["id"]])
                                        for task in tasks], storage or {})


def _successors(
    tasks: list[dict[str, Any]], edges: Iterable[tuple[str, str]]
) -> dict[str, list[str]]:
    """Each task's successors' names, in position order, by the task's id (JSON text).

    ``tasks`` are in position order, so appending each task's predecessors' entries in
    that order keeps every list in it.
    """
    into: dict[str, list[str]] = {task["id"]: [] for task in tasks}
    predecessors: dict[str, list[str]] = defaultdict(list)
    for from_task, to_task in edges:
        predecessors[to_task].append(from_task)
    for task in tasks:
        for from_task in predecessors.get(task["id"], ()):
            into[from_task].append(task["name"])
    return into


def job_summary(row: dict[str, Any]) -> JobSummary:
    """A row of :data:`READ_JOB` or :data:`LIST_JOBS` as a detached summary.

    The row is the job's columns, its first run's id and its latest run's (``latest_*``).
    """
    first_id = row.pop("first_run_id")
    latest = {name: row.pop(f"latest_{name}")
              for name in ("id", "number", "state", "started_at", "finished_at")}
    job = detached(Job, row)
    run = detached(Run, {"job_id": job.id, **latest}) if latest["id"] is not None else None
    return JobSummary(job, job_state(job, latest["state"]), first_id, latest["id"], run)


def _task_view(row: dict[str, Any], successors: list[str]) -> TaskView:
    """A task of :data:`READ_JOB` as a detached task (its ids were JSON text)."""
    task = detached(Task, {**row, "id": UUID(row["id"]), "job_id": UUID(row["job_id"])})
    return TaskView(task, successors)


async def list_jobs(
    conn: AsyncConnection[Any], filters: JobFilter, limit: int, cursor: str | None = None
) -> Page[dict[str, Any]]:
    """Newest first, ``limit`` at a time; pass the returned cursor to get the next page.

    One statement on the API's event loop (:data:`LIST_JOBS`). Its rows are handed on
    as they are, each with its displayed ``state``: the list shows them straight
    (``scheduler.api.list_bodies``). As detached summaries, their objects built and then
    read attribute by attribute and their response validated, a page of 20 cost the API
    a third more CPU; through a Session in a request thread, 7.3 ms.
    """
    rows = await page_rows(conn, LIST_JOBS, LIST_JOBS_WHERE,
                           {**_list_params(filters, cursor), "limit": limit + 1})
    items = rows[:limit]
    for row in items:
        row["state"] = shown_state(row["draft"], row["schedule"], row["enabled"],
                                   row["latest_state"])
    last = items[-1] if len(rows) > limit else None
    return Page(items, encode_time_and_id(last["created_at"], last["id"]) if last else None)


def _list_params(filters: JobFilter, cursor: str | None) -> dict[str, Any]:
    """The parameters of the clauses of :data:`LIST_JOBS_WHERE`.

    Those that ``filters`` and ``cursor`` do not ask for are None: the clause is left out.
    """
    params: dict[str, Any] = {
        "type": filters.type, "application": filters.application, "tenant": filters.tenant,
        "labels": Jsonb(filters.labels) if filters.labels else None,
        "states": list(filters.states) or None,
        "name": f"%{like_escaped(filters.name)}%" if filters.name else None,
    }
    if cursor is not None:
        params["after_created_at"], params["after_id"] = decode_time_and_id(cursor)
        params["cursor"] = True
    if params["states"]:
        params["terminal"] = [state.value for state in RUN_TERMINAL]
    return params


def job_state(job: Job, latest_state: str | None) -> str:
    """What a job shows as its state (see the module docstring)."""
    return shown_state(job.draft, job.schedule, job.enabled, latest_state)


def shown_state(
    draft: bool, schedule: dict[str, Any], enabled: bool, latest_state: str | None
) -> str:
    """:func:`job_state` of a job's columns."""
    between_runs = latest_state is None or RunState(latest_state) in RUN_TERMINAL
    if not draft and schedule.get("cron") and between_runs:
        return "SCHEDULED" if enabled else "DISABLED"
    return latest_state or "NEW"


def like_escaped(text: str) -> str:
    """``text`` matched literally by LIKE: ``%``, ``_`` and the escape itself escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
