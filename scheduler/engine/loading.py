"""Locking and loading the runs a batch of messages touches.

Runs are locked in id order (``SELECT ... FOR UPDATE``), so two engines that touch the
same runs never deadlock, and two predecessors of a join finishing at the same moment
on two engines are applied one after the other: the join is dispatched once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import Connection as PgConnection
from sqlalchemy.orm import Session

from common.domain.snapshot import RunSnapshot, TaskRunView
from common.domain.states import RunState, TaskState
from common.persistence.db import driver
from scheduler.engine.structure import JobStructure, StructureCache


@dataclass
class RunRecord:
    """A locked run: its snapshot plus what the writer needs to persist changes."""

    id: uuid.UUID
    job: JobStructure
    number: int
    version: int
    started_at: datetime | None
    snapshot: RunSnapshot
    task_run_ids: dict[str, uuid.UUID]
    names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    # The job's last successful run, which dispatches carry; it changes with other
    # runs of the job, so it is refreshed from the lock query every time.
    last_success_start: datetime | None = None
    last_success_finish: datetime | None = None
    # Tasks whose current attempt is detached (``TaskResult.detached``): completed by
    # someone else, held by their timeout instead of a worker's lease.
    detached: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        """Index task runs by id, for results that name the task run."""
        self.names_by_id = {v: k for k, v in self.task_run_ids.items()}


LOCK_RUNS = (
    "SELECT r.id, r.job_id, r.number, r.state, r.version, r.started_at, j.version, "
    "s.last_success_start, s.last_success_finish FROM runs r JOIN jobs j ON j.id = r.job_id "
    "LEFT JOIN job_storage s ON s.job_id = r.job_id "
    "WHERE r.id = ANY(%s) ORDER BY r.id FOR UPDATE OF r"
)
LOAD_TASK_RUNS = (
    "SELECT run_id, id, name, state, attempt, base, detached FROM task_runs "
    "WHERE run_id = ANY(%s)"
)


class RunLoader:
    """Loads runs under lock, reusing cached snapshots when the run's version matches."""

    def __init__(self, structures: StructureCache) -> None:
        self._structures = structures
        self._cache: dict[uuid.UUID, RunRecord] = {}

    def lock(self, session: Session, run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, RunRecord]:
        """Lock the runs and return their records (missing runs are left out).

        Runs whose cached snapshot is stale are loaded together: one query for their
        task runs and one set for the job structures missing from the cache.
        """
        conn = driver(session)
        rows = conn.execute(LOCK_RUNS, (sorted(set(run_ids)),)).fetchall()
        records: dict[uuid.UUID, RunRecord] = {}
        stale = []
        for row in rows:
            cached = self._cache.get(row[0])
            if cached is not None and cached.version == row[4]:
                records[row[0]] = cached
            else:
                stale.append(row)
        records.update(self._load(conn, stale))
        for row in rows:
            records[row[0]].last_success_start, records[row[0]].last_success_finish = row[7:9]
        return records

    def remember(self, record: RunRecord) -> None:
        """Keep a record after its changes committed (its version was bumped)."""
        self._cache[record.id] = record

    def forget(self, run_id: uuid.UUID) -> None:
        """Drop a record whose transaction did not commit."""
        self._cache.pop(run_id, None)

    def _load(self, conn: PgConnection[Any], rows: list[Any]) -> dict[uuid.UUID, RunRecord]:
        if not rows:
            return {}
        jobs = self._structures.get_many(conn, {row[1]: row[6] for row in rows})
        task_rows: dict[uuid.UUID, list[Any]] = {row[0]: [] for row in rows}
        for task_row in conn.execute(LOAD_TASK_RUNS, ([row[0] for row in rows],)):
            task_rows[task_row[0]].append(task_row[1:])
        return {row[0]: _record(row, jobs[row[1]], task_rows[row[0]]) for row in rows}


def _record(row: Any, job: JobStructure, task_rows: list[Any]) -> RunRecord:
    """A run's record from its lock row, its job's structure and its task run rows."""
    run_id, _, number, state, version, started_at = row[:6]
    views = {name: TaskRunView(TaskState(st), attempt, base)
             for _, name, st, attempt, base, _ in task_rows}
    snapshot = RunSnapshot(
        state=RunState(state), graph=job.graph, info=job.infos,
        tasks={name: views[name] for name in job.tasks if name in views},
        canary=job.canary, failure_threshold=job.failure_threshold,
    )
    return RunRecord(
        id=run_id, job=job, number=number, version=version, started_at=started_at,
        snapshot=snapshot, task_run_ids={name: id_ for id_, name, *_ in task_rows},
        detached={row[1] for row in task_rows if row[5]},
    )
