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

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.snapshot import RunSnapshot, TaskRunView
from common.domain.states import RunState, TaskState
from common.persistence.models import Job, Run, TaskRun
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


class RunLoader:
    """Loads runs under lock, reusing cached snapshots when the run's version matches."""

    def __init__(self, structures: StructureCache) -> None:
        self._structures = structures
        self._cache: dict[uuid.UUID, RunRecord] = {}

    def lock(self, session: Session, run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, RunRecord]:
        """Lock the runs and return their records (missing runs are left out)."""
        rows = session.execute(
            select(Run.id, Run.job_id, Run.number, Run.state, Run.version, Run.started_at,
                   Job.version.label("job_version"), Job.last_success_start)
            .join(Job, Job.id == Run.job_id)
            .where(Run.id.in_(sorted(set(run_ids))))
            .order_by(Run.id)
            .with_for_update(of=Run)
        ).all()
        records: dict[uuid.UUID, RunRecord] = {}
        for row in rows:
            cached = self._cache.get(row.id)
            if cached is not None and cached.version == row.version:
                records[row.id] = cached
                continue
            job = self._structures.get(
                session, row.job_id, row.job_version, row.last_success_start
            )
            records[row.id] = self._load(session, row, job)
        return records

    def remember(self, record: RunRecord) -> None:
        """Keep a record after its changes committed (its version was bumped)."""
        self._cache[record.id] = record

    def forget(self, run_id: uuid.UUID) -> None:
        """Drop a record whose transaction did not commit."""
        self._cache.pop(run_id, None)

    def _load(self, session: Session, row: object, job: JobStructure) -> RunRecord:
        run_id: uuid.UUID = row.id  # type: ignore[attr-defined]
        task_rows = session.execute(
            select(TaskRun.id, TaskRun.name, TaskRun.state, TaskRun.attempt, TaskRun.base)
            .where(TaskRun.run_id == run_id)
        ).all()
        views = {t.name: TaskRunView(TaskState(t.state), t.attempt, t.base) for t in task_rows}
        ordered = {name: views[name] for name in job.tasks if name in views}
        snapshot = RunSnapshot(
            state=RunState(row.state),  # type: ignore[attr-defined]
            graph=job.graph, info=job.infos, tasks=ordered,
            canary=job.canary, failure_threshold=job.failure_threshold,
        )
        return RunRecord(
            id=run_id, job=job, number=row.number,  # type: ignore[attr-defined]
            version=row.version, started_at=row.started_at,  # type: ignore[attr-defined]
            snapshot=snapshot, task_run_ids={t.name: t.id for t in task_rows},
        )
