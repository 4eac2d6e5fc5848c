"""Locking and loading the runs a batch of messages touches.

Runs are locked in id order (``SELECT ... FOR UPDATE``), so two engines that touch the
same runs never deadlock, and two predecessors of a join finishing at the same moment
on two engines are applied one after the other: the join is dispatched once.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from psycopg import Connection as PgConnection

from common.domain.snapshot import RunSnapshot, TaskRunView
from common.domain.states import RunState, TaskState
from common.persistence.arrays import literal
from common.persistence.pipelined import Pipelined, Reply
from common.persistence.queries import (
    CLAIM_MESSAGES,
    LOAD_TASK_RUNS,
    LOCK_RUNS,
    PIN_PLAN,
    UNPIN_PLAN,
)
from scheduler.engine.structure import JobStructure, StructureCache

# A run another engine changed is locked before its batches are applied, for this long
# (``RunLoader.cached``): an engine that guessed wrong pays a transaction more.
SHARED_FOR_S = 30.0
SHARED_KEPT = 10_000  # runs remembered as shared before old ones go


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
    # The job storage as the lock query read it (JSON text), for the dispatches of this
    # transaction; parsed only when a dispatch needs it.
    storage_json: str | None = None
    # The run's trace context (``common.tracing``): its dispatches carry it.
    traceparent: str | None = None

    def __post_init__(self) -> None:
        """Index task runs by id, for results that name the task run."""
        self.names_by_id = {v: k for k, v in self.task_run_ids.items()}

    def stored_storage(self) -> dict[str, Any]:
        """The job storage committed before this transaction (``{}`` when there is none)."""
        data = json.loads(self.storage_json) if self.storage_json else {}
        return data if isinstance(data, dict) else {}


class LockedRun(NamedTuple):
    """A row of :data:`LOCK_RUNS`, read by name."""

    id: uuid.UUID
    job_id: uuid.UUID
    number: int
    state: str
    version: int
    started_at: datetime | None
    job_version: int
    last_success_start: datetime | None
    last_success_finish: datetime | None
    storage_json: str | None
    traceparent: str | None


class TaskRunRow(NamedTuple):
    """A row of :data:`LOAD_TASK_RUNS`, read by name."""

    run_id: uuid.UUID
    id: uuid.UUID
    name: str
    state: str
    attempt: int
    base: int
    detached: bool


class RunLoader:
    """Loads runs under lock, reusing cached snapshots when the run's version matches."""

    def __init__(self, structures: StructureCache) -> None:
        self._structures = structures
        self._cache: dict[uuid.UUID, RunRecord] = {}
        # Runs found changed by another engine: when (monotonic seconds).
        self._shared: dict[uuid.UUID, float] = {}

    def lock(
        self, conn: PgConnection[Any], run_ids: Iterable[uuid.UUID],
    ) -> dict[uuid.UUID, RunRecord]:
        """Lock the runs and return their records (missing runs are left out).

        Runs whose cached snapshot is stale are loaded together: one query for their
        task runs and one set for the job structures missing from the cache.
        """
        return self.claim_and_lock(conn, [], run_ids)[1]

    def claim_and_lock(
        self, conn: PgConnection[Any], message_ids: list[uuid.UUID],
        run_ids: Iterable[uuid.UUID],
    ) -> tuple[set[uuid.UUID], dict[uuid.UUID, RunRecord]]:
        """Record ``message_ids`` as consumed and lock the runs, in one round trip.

        Returns the message ids not seen before and the locked runs' records. The task
        runs of runs this engine has not cached (a run it starts, most often) are read
        in the same round trip, after the lock; only a cached run that another engine
        changed meanwhile costs one more.
        """
        ids = sorted(set(run_ids))
        unknown = [run_id for run_id in ids if run_id not in self._cache]
        with Pipelined(conn) as pipe:
            sent = SentLock.send(pipe, message_ids, ids)
            prefetched = _task_runs(pipe, unknown) if unknown else None
        fresh, rows = sent.read()
        task_rows = _by_run(
            prefetched.fetch_as(TaskRunRow._make) if prefetched is not None else [])
        records: dict[uuid.UUID, RunRecord] = {}
        stale = []
        for row in rows:
            cached = self._cache.get(row.id)
            if cached is not None and cached.version == row.version:
                records[row.id] = cached
            else:
                stale.append(row)
        records.update(self._load(conn, stale, task_rows))
        for row in rows:
            _refresh(records[row.id], row)
        return fresh, records

    def cached(self, run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, RunRecord] | None:
        """The records of ``run_ids``, or None unless every one is cached and uncontended.

        Uncontended: not found changed by another engine lately (:meth:`contended`).
        A batch may then be applied to them before they are locked, its lock and flow
        reads sent together (``scheduler.engine.batch``).
        """
        now = time.monotonic()
        records = {}
        for run_id in run_ids:
            record = self._cache.get(run_id)
            shared_at = self._shared.get(run_id)
            if record is None or (shared_at is not None and now - shared_at < SHARED_FOR_S):
                return None
            records[run_id] = record
        return records

    def contended(self, run_ids: Iterable[uuid.UUID]) -> None:
        """Forget these records, and lock their runs before applying for a while.

        Another engine changed the runs, or a message of the batch was applied before.
        """
        now = time.monotonic()
        if len(self._shared) > SHARED_KEPT:
            self._shared = {k: at for k, at in self._shared.items() if now - at < SHARED_FOR_S}
        for run_id in run_ids:
            self._cache.pop(run_id, None)
            self._shared[run_id] = now

    def remember(self, record: RunRecord) -> None:
        """Keep a record after its changes committed (its version was bumped)."""
        self._cache[record.id] = record

    def forget(self, run_id: uuid.UUID) -> None:
        """Drop a record whose transaction did not commit."""
        self._cache.pop(run_id, None)

    def _load(
        self, conn: PgConnection[Any], rows: list[LockedRun],
        task_rows: dict[uuid.UUID, list[TaskRunRow]],
    ) -> dict[uuid.UUID, RunRecord]:
        """Records of locked runs; task runs not in ``task_rows`` are read here."""
        if not rows:
            return {}
        jobs = self._structures.get_many(conn, {row.job_id: row.job_version for row in rows})
        missing = [row.id for row in rows if row.id not in task_rows]
        if missing:
            with Pipelined(conn) as pipe:
                read = _task_runs(pipe, missing)
            task_rows = {**task_rows, **_by_run(read.fetch_as(TaskRunRow._make))}
        return {row.id: _record(row, jobs[row.job_id], task_rows.get(row.id, [])) for row in rows}


@dataclass(frozen=True)
class SentLock:
    """The claim of a batch's messages and the lock of its runs, sent in a pipeline."""

    message_ids: list[uuid.UUID]
    claimed: Reply | None
    locked: Reply

    @staticmethod
    def send(pipe: Pipelined, message_ids: list[uuid.UUID],
             run_ids: list[uuid.UUID]) -> SentLock:
        """Claim and lock (runs in id order, ``LOCK_RUNS`` on its generic plan)."""
        claimed = (pipe.execute(CLAIM_MESSAGES, (literal(message_ids),))
                   if message_ids else None)
        pipe.execute(PIN_PLAN)
        locked = pipe.execute(LOCK_RUNS, (literal(run_ids),))
        pipe.execute(UNPIN_PLAN)
        return SentLock(message_ids, claimed, locked)

    def read(self) -> tuple[set[uuid.UUID], list[LockedRun]]:
        """The message ids not seen before, and the locked runs' rows."""
        fresh = {row[0] for row in self.claimed.fetchall()} if self.claimed is not None else set()
        return fresh, self.locked.fetch_as(LockedRun._make)

    def confirms(self, records: dict[uuid.UUID, RunRecord]) -> bool:
        """Whether every message was new and every run locked as cached (its version).

        If so, the lock's fresh columns are copied into the records.
        """
        fresh, rows = self.read()
        if len(fresh) != len(self.message_ids) or len(rows) != len(records):
            return False
        if any(records[row.id].version != row.version for row in rows):
            return False
        for row in rows:
            _refresh(records[row.id], row)
        return True


def _refresh(record: RunRecord, row: LockedRun) -> None:
    """What changes with other runs of the job, or may: read again with every lock."""
    record.last_success_start = row.last_success_start
    record.last_success_finish = row.last_success_finish
    record.storage_json = row.storage_json
    record.traceparent = row.traceparent


def _task_runs(pipe: Pipelined, run_ids: list[uuid.UUID]) -> Reply:
    """The task runs of ``run_ids`` (fetched when the pipeline is over)."""
    return pipe.execute(LOAD_TASK_RUNS, (literal(run_ids),))


def _by_run(task_rows: Iterable[TaskRunRow]) -> dict[uuid.UUID, list[TaskRunRow]]:
    """Task run rows grouped by their run id."""
    grouped: dict[uuid.UUID, list[TaskRunRow]] = defaultdict(list)
    for task_row in task_rows:
        grouped[task_row.run_id].append(task_row)
    return grouped


def _record(row: LockedRun, job: JobStructure, task_rows: list[TaskRunRow]) -> RunRecord:
    """A run's record from its lock row, its job's structure and its task run rows."""
    views = {t.name: TaskRunView(TaskState(t.state), t.attempt, t.base) for t in task_rows}
    snapshot = RunSnapshot(
        state=RunState(row.state), graph=job.graph, info=job.infos,
        tasks={name: views[name] for name in job.tasks if name in views},
        canary=job.canary, failure_threshold=job.failure_threshold,
    )
    return RunRecord(
        id=row.id, job=job, number=row.number, version=row.version,
        started_at=row.started_at, snapshot=snapshot,
        task_run_ids={t.name: t.id for t in task_rows},
        detached={t.name for t in task_rows if t.detached},
    )
