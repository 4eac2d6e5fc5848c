"""Runs across jobs, a job's run history as a grid, and what each live worker runs.

For the people who operate many runs (issue 17): ``GET /runs`` (newest first, with
filters), ``GET /jobs/{id}/history`` (runs x tasks, coloured by state in the UI) and
``GET /workers`` (each live worker, its types, its ACTIVE attempts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.states import TaskState
from common.persistence.detached import detached
from common.persistence.models import Job, Run, TaskRun
from common.persistence.queries import (
    JOB_HISTORY_RUNS,
    JOB_HISTORY_TASKS,
    LIST_RUNS,
    LIST_RUNS_WHERE,
)
from scheduler.services.errors import NotFound
from scheduler.services.pages import Page, decode_time_and_id, encode_time_and_id, page_rows
from scheduler.services.run_queries import listed_run


@dataclass(frozen=True)
class RunFilter:
    """Which runs ``GET /runs`` lists: every given filter must match."""

    tenant: str | None = None
    states: tuple[str, ...] = ()
    triggers: tuple[str, ...] = ()
    job_id: UUID | None = None


async def list_all_runs(
    conn: AsyncConnection[Any], filters: RunFilter, limit: int, cursor: str | None = None,
) -> Page[dict[str, Any]]:
    """Runs of every job the filters admit, newest first, ``limit`` at a time.

    One statement on the API's event loop (:data:`LIST_RUNS`, the task counts with it),
    as ``job_queries.list_jobs`` reads jobs; each row as :func:`listed_run` makes it,
    with its job's ``job_name`` and ``tenant`` (``ListedRunPublic``'s fields).
    """
    params: dict[str, Any] = {
        "tenant": filters.tenant, "states": list(filters.states) or None,
        "triggers": list(filters.triggers) or None, "job_id": filters.job_id,
    }
    if cursor is not None:
        params["after_created_at"], params["after_id"] = decode_time_and_id(cursor)
        params["cursor"] = True
    rows = await page_rows(conn, LIST_RUNS, LIST_RUNS_WHERE, {**params, "limit": limit + 1})
    items = [_listed(row) for row in rows[:limit]]
    last = items[-1] if len(rows) > limit else None
    return Page(items, encode_time_and_id(last["created_at"], last["id"]) if last else None)


def _listed(row: dict[str, Any]) -> dict[str, Any]:
    """A :data:`LIST_RUNS` row as ``GET /runs`` shows it: its job's tenant as ``tenant``."""
    row["tenant"] = row.pop("job_tenant")
    return listed_run(row)


@dataclass(frozen=True)
class HistoryRow:
    """One run of a job's history: its state, times and each task's state."""

    run: Run
    tasks: dict[str, str]


async def run_grid(
    conn: AsyncConnection[Any], job_id: UUID, tenant: str | None, limit: int,
) -> tuple[list[str], list[HistoryRow]]:
    """The job's tasks in order, and its last ``limit`` runs with each task's state.

    :class:`NotFound` unless the job exists and is ``tenant``'s (None: any). Plain SQL
    on the API's event loop, one round trip (the UI's history grid is polled).
    """
    async with conn.pipeline():
        job = await conn.execute(JOB_HISTORY_TASKS, (job_id,))
        runs = await conn.cursor(row_factory=dict_row).execute(
            JOB_HISTORY_RUNS, (job_id, limit))
    row = await job.fetchone()
    if row is None or (tenant is not None and row[0] != tenant):
        raise NotFound("job", job_id)
    return list(row[1]), [_history_row(run) for run in await runs.fetchall()]


def _history_row(row: dict[str, Any]) -> HistoryRow:
    """A :data:`JOB_HISTORY_RUNS` row as a detached run and its task states."""
    tasks = row.pop("tasks") or {}
    return HistoryRow(detached(Run, row), tasks)


def running_by_worker(
    session: Session, workers: Sequence[Mapping[str, Any]], tenant: str | None,
) -> dict[str, list[dict[str, Any]]]:
    """Each live worker's ACTIVE attempts (a tenant-bound caller sees its tenant's only)."""
    names = [str(worker.get("hostname")) for worker in workers]
    query = (select(TaskRun.worker, TaskRun.run_id, TaskRun.name, TaskRun.attempt,
                    TaskRun.started_at, Job.name)
             .join(Run, Run.id == TaskRun.run_id).join(Job, Job.id == Run.job_id)
             .where(TaskRun.state == TaskState.ACTIVE.value, TaskRun.worker.in_(names)))
    if tenant is not None:
        query = query.where(Job.tenant == tenant)
    running: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for worker, run_id, task, attempt, started_at, job_name in session.execute(
            query.order_by(TaskRun.started_at)):
        running[str(worker)].append({"run_id": run_id, "job_name": job_name, "task": task,
                                     "attempt": attempt, "started_at": started_at})
    return dict(running)
