"""The beat's duties on a real database: each due thing is signalled exactly once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from common.domain.spec import JobSpec
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import Job, OutboxMessage, Run, TaskRun
from scheduler.beat import duties
from scheduler.services.jobs import create_job
from scheduler.services.runs import create_run

NOW = datetime.now(UTC)


def test_due_runs_and_retries_are_signalled_once(own_database: str) -> None:
    sessions = make_sessions(make_engine(own_database))
    spec = JobSpec.model_validate({
        "name": "beat-duties", "schedule": {"at": (NOW - timedelta(seconds=1)).isoformat()},
        "tasks": [{"name": "a", "type": "noop"}, {"name": "b", "type": "noop"}],
    })
    with sessions.begin() as session:
        created = create_job(session, spec, NOW - timedelta(seconds=5))
        run_id = created.run_id
        session.execute(update(Run).where(Run.id == run_id).values(activation_sent_at=None))
        session.execute(update(TaskRun).where(TaskRun.run_id == run_id, TaskRun.name == "a")
                        .values(retry_at=NOW - timedelta(seconds=1), attempt=1))
    for first_pass in (True, False):  # the second pass finds nothing left to do
        with sessions.begin() as session:
            ids = duties.start_due_runs(session, NOW)
            ids += duties.fire_due_retries(session, NOW)
            payloads = [session.get_one(OutboxMessage, i).payload for i in ids]
        signals = sorted((p["signal"], p.get("task"), p.get("attempt")) for p in payloads
                         if p.get("run_id") == str(run_id))
        if first_pass:
            assert signals == [("retry_due", "a", 1), ("start", None, None)]
        else:
            assert signals == []
    with sessions() as session:
        rows = session.execute(select(TaskRun.retry_at).where(TaskRun.run_id == run_id)).all()
    assert all(r.retry_at is None for r in rows)


def test_a_capped_job_gets_its_runs_started_as_earlier_ones_finish(own_database: str) -> None:
    """``max_active_runs: 1``: three runs asked for at once start one after another."""
    sessions = make_sessions(make_engine(own_database))
    spec = JobSpec.model_validate({"name": "capped", "max_active_runs": 1, "draft": True,
                                   "tasks": [{"name": "a", "type": "noop"}]})
    with sessions.begin() as session:
        job_id = create_job(session, spec, NOW).job_id
        session.execute(update(Job).where(Job.id == job_id).values(draft=False))
        runs = [create_run(session, job_id, "api", NOW, NOW) for _ in range(3)]
    assert all(run.outbox_ids == [] for run in runs)  # left to the beat, which counts

    def started() -> list[uuid.UUID]:
        with sessions.begin() as session:
            duties.start_due_runs(session, NOW)
        with sessions() as session:
            return list(session.scalars(select(Run.id).where(
                Run.job_id == job_id, Run.activation_sent_at.is_not(None)).order_by(Run.number)))

    assert started() == [runs[0].run_id]
    assert started() == [runs[0].run_id]  # full: nothing more
    with sessions.begin() as session:
        session.execute(update(Run).where(Run.id == runs[0].run_id)
                        .values(state="COMPLETED", finished_at=NOW))
    assert started() == [runs[0].run_id, runs[1].run_id]
