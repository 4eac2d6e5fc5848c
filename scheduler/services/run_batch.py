"""Creating many runs at once: the beat's cron fires, a few statements per batch.

:func:`scheduler.services.runs.create_run` costs half a dozen ORM round trips per run,
fine for the API, several milliseconds per fire for the beat: 250 fires a second
took a whole core. Here every step is one statement for the whole batch. The runs are
what ``create_run`` makes (READY, one WAITING task run per task, a journal entry, a
``run.scheduled`` event); their activations are left to ``start_due_runs``, which
times them. The callers hold the jobs' row locks, which keeps run numbers unique.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection as PgConnection
from sqlalchemy.orm import Session

from common.persistence.db import driver
from common.persistence.models import Job
from common.persistence.notify_events import record_events
from scheduler.services.runs import Trigger, late_at, scheduled_event


@dataclass(frozen=True)
class NewRun:
    """One run to create: its id is chosen by the caller (a fire row points at it)."""

    id: UUID
    job: Job
    trigger: Trigger
    scheduled_for: datetime


def create_runs(session: Session, runs: Sequence[NewRun], now: datetime) -> None:
    """Insert the runs, their task runs, journal entries and ``run.scheduled`` events."""
    if not runs:
        return
    conn = driver(session)
    numbers = _numbers(conn, runs)
    ids = [r.id for r in runs]
    conn.execute(INSERT_RUNS, (
        now, now, ids, [r.job.id for r in runs], [numbers[r.id] for r in runs],
        [r.trigger for r in runs], [r.scheduled_for for r in runs],
        [late_at(r.job, r.scheduled_for) for r in runs],
    ))
    conn.execute(INSERT_TASK_RUNS, (ids, [r.job.id for r in runs]))
    conn.execute(INSERT_JOURNAL, (now, ids, [r.trigger for r in runs]))
    record_events(session, [scheduled_event(r.job, r.id, now) for r in runs])


INSERT_RUNS = (
    "INSERT INTO runs (id, job_id, number, trigger, state, scheduled_for, late_at, "
    "created_at, updated_at, version) "
    "SELECT r.id, r.job_id, r.number, r.trigger, 'READY', r.scheduled_for, r.late_at, "
    "%s, %s, 0 FROM unnest(%b::uuid[], %b::uuid[], %b::int[], %b::text[], "
    "%b::timestamptz[], %b::timestamptz[]) AS r(id, job_id, number, trigger, scheduled_for, "
    "late_at)"
)
INSERT_TASK_RUNS = (
    "INSERT INTO task_runs (id, run_id, task_id, name, type, state, attempt, base, message) "
    "SELECT gen_random_uuid(), r.id, t.id, t.name, t.type, 'WAITING', 0, 0, '' "
    "FROM unnest(%b::uuid[], %b::uuid[]) AS r(id, job_id) JOIN tasks t ON t.job_id = r.job_id"
)
INSERT_JOURNAL = (
    "INSERT INTO journal (run_id, at, from_state, to_state, reason, actor) "
    "SELECT r.id, %s, '', 'READY', 'created', r.actor "
    "FROM unnest(%b::uuid[], %b::text[]) AS r(id, actor)"
)


def _numbers(conn: PgConnection[Any], runs: Sequence[NewRun]) -> dict[UUID, int]:
    """Each run's number: the job's last one plus its place among this batch's runs."""
    job_ids = list({r.job.id for r in runs})
    last: dict[UUID, int] = dict(conn.execute(
        "SELECT job_id, max(number) FROM runs WHERE job_id = ANY(%s) GROUP BY job_id",
        (job_ids,),
    ).fetchall())
    numbers = {}
    for run in sorted(runs, key=lambda r: r.scheduled_for):
        last[run.job.id] = numbers[run.id] = last.get(run.job.id, 0) + 1
    return numbers
