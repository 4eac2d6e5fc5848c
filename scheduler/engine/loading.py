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

    def __post_init__(self) -> None:
        """Index task runs by id, for results that name the task run."""
        self.names_by_id = {v: k for k, v in self.task_run_ids.items()}


LOCK_RUNS = (
    "SELECT r.id, r.job_id, r.number, r.state, r.version, r.started_at, j.version, "
    "j.last_success_start FROM runs r JOIN jobs j ON j.id = r.job_id "
    "WHERE r.id = ANY(%s) ORDER BY r.id FOR UPDATE OF r"
)
LOAD_TASK_RUNS = "SELECT id, name, state, attempt, base FROM task_runs WHERE run_id = %s"


def driver(session: Session) -> PgConnection[Any]:
    """The psycopg connection under the session's current transaction (the hot path)."""
    connection = session.connection().connection.driver_connection
    assert isinstance(connection, PgConnection)
    return connection


class RunLoader:
    """Loads runs under lock, reusing cached snapshots when the run's version matches."""

    def __init__(self, structures: StructureCache) -> None:
        self._structures = structures
        self._cache: dict[uuid.UUID, RunRecord] = {}

    def lock(self, session: Session, run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, RunRecord]:
        """Lock the runs and return their records (missing runs are left out)."""
        conn = driver(session)
        records: dict[uuid.UUID, RunRecord] = {}
        for row in conn.execute(LOCK_RUNS, (sorted(set(run_ids)),)).fetchall():
            run_id, job_id, version, job_version, last_success = (
                row[0], row[1], row[4], row[6], row[7]
            )
            cached = self._cache.get(run_id)
            if cached is not None and cached.version == version:
                records[run_id] = cached
                continue
            job = self._structures.get(session, job_id, job_version, last_success)
            records[run_id] = self._load(conn, row, job)
        return records

    def remember(self, record: RunRecord) -> None:
        """Keep a record after its changes committed (its version was bumped)."""
        self._cache[record.id] = record

    def forget(self, run_id: uuid.UUID) -> None:
        """Drop a record whose transaction did not commit."""
        self._cache.pop(run_id, None)

    def _load(self, conn: PgConnection[Any], row: Any, job: JobStructure) -> RunRecord:
        run_id, _, number, state, version, started_at = row[:6]
        task_rows = conn.execute(LOAD_TASK_RUNS, (run_id,)).fetchall()
        views = {name: TaskRunView(TaskState(st), attempt, base)
                 for _, name, st, attempt, base in task_rows}
        ordered = {name: views[name] for name in job.tasks if name in views}
        snapshot = RunSnapshot(
            state=RunState(state), graph=job.graph, info=job.infos, tasks=ordered,
            canary=job.canary, failure_threshold=job.failure_threshold,
        )
        return RunRecord(
            id=run_id, job=job, number=number, version=version, started_at=started_at,
            snapshot=snapshot, task_run_ids={name: id_ for id_, name, *_ in task_rows},
        )
