"""Writing a batch's :class:`ChangeSet` in a few set-based statements."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from common.messaging.notify import notify_message
from common.persistence.models import (
    Job,
    JobStorage,
    JournalEntry,
    Run,
    TaskLog,
    TaskRun,
    table_of,
)
from common.persistence.outbox import enqueue
from scheduler.engine.changes import ChangeSet
from scheduler.engine.loading import RunRecord

CLAIM = text(
    "INSERT INTO consumed_messages (message_id) SELECT unnest(CAST(:ids AS uuid[])) "
    "ON CONFLICT DO NOTHING RETURNING message_id"
)


def claim_messages(session: Session, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Record message ids as consumed; return those not seen before (one statement)."""
    if not ids:
        return set()
    return set(session.scalars(CLAIM, {"ids": ids}))


def read_storage(session: Session, changes: ChangeSet) -> dict[uuid.UUID, dict[str, Any]]:
    """Job storage of the jobs that get dispatches in this batch."""
    job_ids = {run.job.id for run, _ in changes.dispatches}
    if not job_ids:
        return {}
    rows = session.execute(
        select(JobStorage.job_id, JobStorage.data).where(JobStorage.job_id.in_(job_ids))
    )
    return {row.job_id: row.data for row in rows}


def write(session: Session, runs: list[RunRecord], changes: ChangeSet) -> list[int]:
    """Persist every change of the batch; return the outbox ids to relay."""
    _write_task_runs(session, changes)
    for run in runs:
        values = {"version": Run.version + 1, "updated_at": changes.now}
        values.update(changes.runs.get(run.id, {}))
        session.execute(update(Run).where(Run.id == run.id).values(**values))
        run.version += 1
    if changes.journal:
        session.execute(insert(table_of(JournalEntry)), changes.journal)
    if changes.logs:
        session.execute(insert(table_of(TaskLog)), changes.logs)
    _write_job_rows(session, changes)
    changes.messages += [notify_message(events) for events in changes.events.values() if events]
    return enqueue(session, changes.messages)


def _write_task_runs(session: Session, changes: ChangeSet) -> None:
    """One executemany per distinct column set (a Core UPDATE by primary key)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for task_id, cols in changes.tasks.items():
        if cols:
            groups[tuple(sorted(cols))].append({"_id": task_id, **cols})
    table = table_of(TaskRun)
    for columns, rows in groups.items():
        stmt = (
            update(table).where(table.c.id == bindparam("_id"))
            .values({name: bindparam(name) for name in columns})
        )
        session.execute(stmt, rows)


def _write_job_rows(session: Session, changes: ChangeSet) -> None:
    for job_id, data in changes.storage.items():
        stmt = pg_insert(JobStorage).values(job_id=job_id, data=data, updated_at=changes.now)
        session.execute(stmt.on_conflict_do_update(
            index_elements=[JobStorage.job_id], set_={"data": data, "updated_at": changes.now},
        ))
    for job_id, (start, finish) in changes.successes.items():
        session.execute(
            update(Job).where(Job.id == job_id)
            .values(last_success_start=start, last_success_finish=finish)
        )
