"""Retention on a real database (issue 14): old finished runs go with all that hangs off them.

Each test makes its own jobs in a tenant of its own and counts only their rows; the
beat's duty, which prunes every tenant, runs on the module's own database.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, func, insert, select, update
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from common.domain.spec import JobSpec
from common.persistence.models import Fire, JournalEntry, Run, TaskLog, TaskRun
from common.persistence.retention import PruneScope, prune, prune_batch
from scheduler.beat.retention import Retention
from scheduler.services.jobs import create_job
from scheduler.services.runs import create_run

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)
RECENT = NOW - timedelta(days=1)
CUTOFF = NOW - timedelta(days=30)


@dataclass
class History:
    """A job's runs by number, and its tenant."""

    job_id: uuid.UUID
    tenant: str
    runs: dict[int, uuid.UUID]


def make_history(
    sessions: sessionmaker[Session], tenant: str, finished: Sequence[datetime | None],
) -> History:
    """A job of two tasks with one run per entry: finished then (COMPLETED), or still ACTIVE.

    Each run gets a task log line and a journal entry per task, and a cron fire at its
    scheduled time, some hours before it finished (an ACTIVE run's: some hours ago).
    """
    spec = JobSpec.model_validate({
        "name": f"retention-{uuid.uuid4().hex[:8]}", "tenant": tenant,
        "schedule": {"cron": "0 0 1 1 *", "timezone": "UTC"},  # no run of its own
        "tasks": [{"name": "a", "type": "noop", "next": ["b"]}, {"name": "b", "type": "noop"}],
    })
    runs: dict[int, uuid.UUID] = {}
    with sessions.begin() as session:
        job_id = create_job(session, spec, OLD - timedelta(days=1)).job_id
        for number, at in enumerate(finished, start=1):
            scheduled = (at or NOW) - timedelta(hours=number)
            run_id = create_run(session, job_id, "schedule", scheduled, scheduled).run_id
            runs[number] = run_id
            _finish(session, run_id, at)
            session.execute(insert(Fire).values(
                job_id=job_id, fire_at=scheduled, outcome="run", trigger="schedule",
                run_id=run_id, recorded_at=scheduled))
    return History(job_id, tenant, runs)


def _finish(session: Session, run_id: uuid.UUID, at: datetime | None) -> None:
    state = "COMPLETED" if at is not None else "ACTIVE"
    session.execute(update(Run).where(Run.id == run_id).values(state=state, finished_at=at))
    task_runs = session.scalars(select(TaskRun.id).where(TaskRun.run_id == run_id)).all()
    for task_run_id in task_runs:
        session.execute(insert(TaskLog).values(
            task_run_id=task_run_id, attempt=1, at=at or NOW, stream="stdout", line="hello"))
        session.execute(insert(JournalEntry).values(
            run_id=run_id, task="a", attempt=1, at=at or NOW, from_state="ACTIVE",
            to_state="COMPLETED" if at else "ACTIVE"))


def remaining(sessions: sessionmaker[Session], history: History) -> dict[str, object]:
    """The run numbers left, and how many rows hang off the job's runs in each table."""
    run_ids = list(history.runs.values())
    with sessions() as session:
        numbers = session.scalars(
            select(Run.number).where(Run.job_id == history.job_id).order_by(Run.number)).all()
        task_runs = select(TaskRun.id).where(TaskRun.run_id.in_(run_ids))
        return {
            "runs": list(numbers),
            "task_runs": _count(session, TaskRun, TaskRun.run_id.in_(run_ids)),
            "logs": _count(session, TaskLog, TaskLog.task_run_id.in_(task_runs)),
            "journal": _count(session, JournalEntry, JournalEntry.run_id.in_(run_ids)),
            "fires": _count(session, Fire, Fire.job_id == history.job_id),
        }


def _count(session: Session, model: type[DeclarativeBase], where: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(where)) or 0)


def unique_tenant() -> str:
    return f"retention-{uuid.uuid4().hex[:8]}"


def left(runs: list[int]) -> dict[str, object]:
    """What a job of two tasks keeps with these runs (each made as ``make_history`` does).

    A run's journal: its creation and an entry per task.
    """
    n = len(runs)
    return {"runs": runs, "task_runs": 2 * n, "logs": 2 * n, "journal": 3 * n, "fires": n}


def test_old_finished_runs_go_with_their_task_runs_logs_journal_and_fires(
    sessions: sessionmaker[Session],
) -> None:
    tenant = unique_tenant()
    history = make_history(sessions, tenant, [OLD] * 14 + [RECENT])

    with sessions.begin() as session:
        pruned = prune_batch(session, PruneScope(CUTOFF, keep_runs=3, tenant=tenant))

    # runs 1-12 are old enough, but 13 and 14 are among the job's last three runs
    assert (pruned.runs, pruned.fires, pruned.more) == (12, 12, False)
    assert remaining(sessions, history) == left([13, 14, 15])


def test_unfinished_recent_and_the_last_runs_of_each_job_stay(
    sessions: sessionmaker[Session],
) -> None:
    tenant = unique_tenant()
    busy = make_history(sessions, tenant, [OLD, None, OLD, None])  # 2 and 4 still ACTIVE
    recent = make_history(sessions, tenant, [RECENT, RECENT])
    few = make_history(sessions, tenant, [OLD, OLD])

    pruned = prune(sessions, PruneScope(CUTOFF, keep_runs=2, tenant=tenant), max_batches=5)

    assert pruned.runs == 1  # busy's run 1: run 3 is among its last two
    assert remaining(sessions, busy)["runs"] == [2, 3, 4]
    assert remaining(sessions, recent) == left([1, 2])
    assert remaining(sessions, few) == left([1, 2])


def test_keep_zero_takes_every_old_finished_run(sessions: sessionmaker[Session]) -> None:
    tenant = unique_tenant()
    history = make_history(sessions, tenant, [OLD, None, OLD])

    prune(sessions, PruneScope(CUTOFF, keep_runs=0, tenant=tenant), max_batches=5)

    assert remaining(sessions, history) == left([2])


def test_a_tenants_prune_leaves_other_tenants_alone(sessions: sessionmaker[Session]) -> None:
    mine, theirs = unique_tenant(), unique_tenant()
    own = make_history(sessions, mine, [OLD, OLD])
    other = make_history(sessions, theirs, [OLD, OLD])

    prune(sessions, PruneScope(CUTOFF, keep_runs=0, tenant=mine), max_batches=5)

    assert remaining(sessions, own) == left([])
    assert remaining(sessions, other) == left([1, 2])


def test_batches_are_small_and_a_pass_stops_after_its_batches(
    sessions: sessionmaker[Session],
) -> None:
    tenant = unique_tenant()
    history = make_history(sessions, tenant, [OLD + timedelta(minutes=n) for n in range(7)])
    scope = PruneScope(CUTOFF, keep_runs=0, tenant=tenant)

    first = prune(sessions, scope, max_batches=2, limit=2)
    after_first = remaining(sessions, history)["runs"]
    rest = prune(sessions, scope, max_batches=10, limit=2)

    assert (first.runs, first.more) == (4, True)
    assert after_first == [5, 6, 7]  # the first to finish go first
    assert (rest.runs, rest.more) == (3, False)
    assert remaining(sessions, history) == left([])


def test_a_run_held_by_another_transaction_is_passed_by_not_waited_for(
    sessions: sessionmaker[Session],
) -> None:
    """An engine restarting a finished run holds its row: retention skips it."""
    tenant = unique_tenant()
    history = make_history(sessions, tenant, [OLD, OLD])
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with sessions.begin() as session:
            session.execute(select(Run.id).where(Run.id == history.runs[1]).with_for_update())
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(30)
        pruned = prune(sessions, PruneScope(CUTOFF, keep_runs=0, tenant=tenant), max_batches=5)
    finally:
        release.set()
        holder.join(30)

    assert pruned.runs == 1
    assert remaining(sessions, history)["runs"] == [1]


def test_a_buffered_fire_waits_however_old(sessions: sessionmaker[Session]) -> None:
    tenant = unique_tenant()
    history = make_history(sessions, tenant, [OLD])
    with sessions.begin() as session:
        session.execute(insert(Fire).values(
            job_id=history.job_id, fire_at=OLD - timedelta(days=5), outcome="buffered",
            trigger="schedule", run_id=None, recorded_at=OLD))
        session.execute(insert(Fire).values(
            job_id=history.job_id, fire_at=OLD - timedelta(days=6), outcome="skipped",
            trigger="schedule", reason="overlap", run_id=None, recorded_at=OLD))

    pruned = prune(sessions, PruneScope(CUTOFF, keep_runs=0, tenant=tenant), max_batches=5)

    assert (pruned.runs, pruned.fires) == (1, 2)  # the run's fire and the skipped one
    with sessions() as session:
        outcomes = session.scalars(select(Fire.outcome).where(Fire.job_id == history.job_id))
        assert list(outcomes) == ["buffered"]


def test_the_beats_duty_prunes_past_the_retention_and_comes_back_while_more_is_left(
    sessions: sessionmaker[Session],
) -> None:
    """Other tests' old runs in this module's database go too: the duty prunes every tenant."""
    history = make_history(sessions, unique_tenant(), [OLD] * 5 + [RECENT])
    duty = Retention(sessions, timedelta(days=30), keep_runs=1, batches_per_tick=1,
                     batch_runs=2)

    first = duty(NOW)
    ticks = 1
    while duty(NOW).more:  # more was left: it looks again at once, not a minute later
        ticks += 1
        assert ticks < 100

    assert (first.runs, first.more) == (2, True)
    assert remaining(sessions, history) == left([6])


def test_the_beats_duty_looks_once_a_minute_when_nothing_is_left(
    sessions: sessionmaker[Session],
) -> None:
    duty = Retention(sessions, timedelta(days=30), keep_runs=0)
    duty(NOW)  # nothing old in this module's database by now
    history = make_history(sessions, unique_tenant(), [OLD])

    duty(NOW + timedelta(seconds=59))
    kept = remaining(sessions, history)["runs"]
    duty(NOW + timedelta(seconds=60))

    assert kept == [1]
    assert remaining(sessions, history) == left([])
