"""Reading runs: a run with its task runs and progress, its journal, and task logs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from common.domain.states import TaskState
from common.persistence.db import driver
from common.persistence.detached import detached
from common.persistence.models import JournalEntry, Run, TaskLog, TaskRun
from common.persistence.queries import (
    LIST_JOB_RUNS,
    LIST_JOB_RUNS_WHERE,
    READ_JOURNAL,
    READ_JOURNAL_WHERE,
    READ_RUN,
    READ_RUN_TASKS,
    RUN_VERSIONS,
)
from scheduler.services.errors import InvalidInput, NotFound
from scheduler.services.pages import Page, decode_cursor, encode_cursor, filtered, page_rows

_STATE_ORDER = {state.value: index for index, state in enumerate(TaskState)}


@dataclass(frozen=True)
class RunSummary:
    """A run with its task counts per state."""

    run: Run
    progress: dict[str, int]


class ShownTaskRun(NamedTuple):
    """What the API shows of a task run (``TaskRunPublic``): its columns, not an ORM object.

    Loading ORM objects cost a run of 500 tasks 12 ms of the API's CPU, its columns 4.
    """

    id: UUID
    name: str
    type: str
    state: str
    attempt: int
    worker: str | None
    output: dict[str, Any] | None
    message: str
    started_at: datetime | None
    finished_at: datetime | None
    waiting_for: str | None


@dataclass(frozen=True)
class RunDetail:
    """A run with its task runs, in the job's task order, and each one's binding."""

    summary: RunSummary
    tasks: list[ShownTaskRun]
    # Task run id -> its task's ``binding`` (registered worker types only).
    bindings: dict[UUID, dict[str, Any]] = field(default_factory=dict)


def get_run(session: Session, run_id: UUID) -> RunDetail:
    """The run with its task runs and progress, or :class:`NotFound`.

    Plain SQL in one round trip, as :func:`get_run_async` reads it on the API's event
    loop; the run is a detached object, to show, not to change.
    """
    conn = driver(session)
    with conn.pipeline():
        run_rows = conn.cursor(row_factory=dict_row).execute(READ_RUN, (run_id,))
        task_rows = conn.execute(READ_RUN_TASKS, (run_id,))
    return run_detail(run_id, run_rows.fetchone(), task_rows.fetchall())


async def get_run_async(conn: AsyncConnection[Any], run_id: UUID) -> RunDetail:
    """:func:`get_run` on an async connection (the API's reads of a run)."""
    async with conn.pipeline():
        run_rows = await conn.cursor(row_factory=dict_row).execute(READ_RUN, (run_id,))
        task_rows = await conn.execute(READ_RUN_TASKS, (run_id,))
    return run_detail(run_id, await run_rows.fetchone(), await task_rows.fetchall())


def run_detail(
    run_id: UUID, row: dict[str, Any] | None, task_rows: list[tuple[Any, ...]],
) -> RunDetail:
    """A :data:`READ_RUN` row and its :data:`READ_RUN_TASKS` rows as a detail."""
    if row is None:
        raise NotFound("run", run_id)
    tasks = [ShownTaskRun(*task[:-1]) for task in task_rows]
    bindings = {task[0]: task[-1] for task in task_rows if task[-1]}
    summary = RunSummary(detached(Run, row), progress(Counter(t.state for t in tasks)))
    return RunDetail(summary, tasks, bindings)


async def list_runs(
    conn: AsyncConnection[Any], job_id: UUID, tenant: str | None, limit: int,
    cursor: str | None = None, *, states: tuple[str, ...] = (),
) -> Page[dict[str, Any]]:
    """The job's runs (in one of ``states``, if given), newest first, ``limit`` at a time.

    :class:`NotFound` unless the job exists and belongs to ``tenant`` (None: any). One
    statement on the API's event loop (:data:`LIST_JOB_RUNS`, the task counts with it);
    its rows handed on as :func:`listed_run` makes them, for the list to show straight.
    """
    params: dict[str, Any] = {"job_id": job_id, "limit": limit + 1, "states": list(states) or None}
    if cursor is not None:
        params["before"], params["cursor"] = _number(decode_cursor(cursor, 1)[0]), True
    rows = await page_rows(conn, LIST_JOB_RUNS, LIST_JOB_RUNS_WHERE, params)
    if not rows or (tenant is not None and rows[0]["job_tenant"] != tenant):
        raise NotFound("job", job_id)
    for row in rows:
        del row["job_tenant"]
    runs = [listed_run(row) for row in rows if row["id"] is not None]
    next_cursor = encode_cursor([runs[limit - 1]["number"]]) if len(runs) > limit else None
    return Page(runs[:limit], next_cursor)


def listed_run(row: dict[str, Any]) -> dict[str, Any]:
    """A row of :data:`LISTED_RUN_COLUMNS` as the lists show it.

    Its task counts become ``progress``: the row is then ``RunSummaryPublic``'s fields.
    """
    row["progress"] = progress(Counter(row.pop("counts") or {}))
    return row


async def journal(
    conn: AsyncConnection[Any], run_id: UUID, tenant: str | None, limit: int,
    cursor: str | None = None, *, task: str | None = None,
) -> Page[JournalEntry]:
    """A page of the run's journal (``task``'s entries only, if given), oldest first.

    Detached entries, ``limit`` at a time (a 10,000-task fan-out records some 40,000).
    :class:`NotFound` unless the run exists and is ``tenant``'s (None: any). Plain SQL
    on the API's event loop, the run's owner and the page in one round trip.
    """
    after = 0 if cursor is None else _number(decode_cursor(cursor, 1)[0])
    params = {"run_id": run_id, "task": task, "limit": limit + 1, "after": after}
    async with conn.pipeline():
        owner = await conn.execute(RUN_VERSIONS, (run_id,))
        rows = await conn.cursor(row_factory=dict_row).execute(
            filtered(READ_JOURNAL, READ_JOURNAL_WHERE, params), params)
    _versions_seen(await owner.fetchone(), run_id, tenant)
    entries = [detached(JournalEntry, row) for row in await rows.fetchall()]
    next_cursor = encode_cursor([entries[limit - 1].id]) if len(entries) > limit else None
    return Page(entries[:limit], next_cursor)


def task_logs(
    session: Session, run_id: UUID, task: str, attempt: int | None = None
) -> list[TaskLog]:
    """The captured lines of a task (by name or task run id), optionally of one attempt."""
    task_run = find_task_run(session, run_id, task)
    query = select(TaskLog).where(TaskLog.task_run_id == task_run.id)
    if attempt is not None:
        query = query.where(TaskLog.attempt == attempt)
    return list(session.scalars(query.order_by(TaskLog.id)))


async def run_versions(
    conn: AsyncConnection[Any], run_id: UUID, tenant: str | None,
) -> tuple[int, int]:
    """The run's version and its job's, or :class:`NotFound` (``tenant``'s runs only).

    The engine bumps a run's version in every transaction that changes the run or its
    task runs (``scheduler.engine.writer``), and nothing else writes what a run's
    representation shows; the job's version covers its tasks' bindings. So a reader
    that saw these two numbers has seen that run, and one query answers "changed?"
    (a poll's 304 costs this read only).
    """
    cursor = await conn.execute(RUN_VERSIONS, (run_id,))
    row = _versions_seen(await cursor.fetchone(), run_id, tenant)
    return int(row[0]), int(row[1])


def _versions_seen(
    row: tuple[Any, ...] | None, run_id: UUID, tenant: str | None,
) -> tuple[Any, ...]:
    """A :data:`RUN_VERSIONS` row if the run exists and is ``tenant``'s (None: any).

    Else :class:`NotFound`, as :func:`tenancy.visible_run` would say.
    """
    if row is None or (tenant is not None and row[2] != tenant):
        raise NotFound("run", run_id)
    return row


def require_run(session: Session, run_id: UUID) -> Run:
    """The run, or :class:`NotFound` naming its id."""
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound("run", run_id)
    return run


def find_task_run(session: Session, run_id: UUID, task: str) -> TaskRun:
    """The run's task run named ``task``, or whose id is ``task``."""
    require_run(session, run_id)
    condition = TaskRun.name == task
    task_run_id = _as_uuid(task)
    if task_run_id is not None:
        condition = or_(condition, TaskRun.id == task_run_id)
    found = session.scalars(
        select(TaskRun).where(TaskRun.run_id == run_id, condition).limit(1)
    ).one_or_none()
    if found is None:
        raise NotFound("task", f"{task!r} in run {run_id}")
    return found


def progress(counts: Counter[str]) -> dict[str, int]:
    """Task counts per state, in the order the states are declared, without zeros."""
    return {
        state: n for state, n in sorted(counts.items(), key=lambda i: _STATE_ORDER.get(i[0], 99))
        if n
    }


def _as_uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


def _number(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(("query", "cursor"), "not a cursor returned by this API")
    return value
