"""The cron duty on a real database: exactly one run per fire, catchup and overlap.

Time is a fake clock far in the future, and the tests use a database of their own, so a
real beat of the e2e tests and these fake times never claim each other's jobs.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from common.domain.spec import JobSpec
from common.persistence.db import make_engine, make_sessions
from common.persistence.migrate import upgrade
from common.persistence.models import Fire, Job, NotifyEvents, OutboxMessage, Run
from scheduler.beat import crons
from scheduler.services.jobs import create_job
from tests.conftest import scratch_database

T0 = datetime(2031, 1, 1, 0, 0, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture(scope="module")
def cron_database(server_urls: tuple[str, str]) -> Iterator[str]:
    with scratch_database(server_urls[0]) as url:
        upgrade(url)
        yield url


@pytest.fixture
def sessions(cron_database: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(cron_database)
    made = make_sessions(engine)
    with made.begin() as session:  # each test starts without jobs
        session.execute(update(Job).values(next_fire_at=None))
    yield made
    engine.dispose()


def cron_job(sessions: sessionmaker[Session], name: str, **settings: Any) -> UUID:
    spec = JobSpec.model_validate({
        "name": name, "schedule": {"cron": "* * * * *"}, "tasks": [{"name": "a", "type": "noop"}],
        **settings,
    })
    with sessions.begin() as session:
        return create_job(session, spec, T0).job_id


def tick(sessions: sessionmaker[Session], now: datetime) -> list[int]:
    with sessions.begin() as session:
        return crons.fire_due_crons(session, now) + crons.release_buffered(session, now)


def recorded(sessions: sessionmaker[Session], job_id: UUID) -> list[dict[str, Any]]:
    """The events recorded for notify about the job (no notify runner takes them here)."""
    with sessions() as session:
        rows = session.scalars(select(NotifyEvents.events).order_by(NotifyEvents.id)).all()
    return [e for events in rows for e in events if e.get("job_id") == str(job_id)]


def runs_of(sessions: sessionmaker[Session], job_id: UUID) -> list[tuple[datetime, str]]:
    with sessions() as session:
        rows = session.execute(select(Run.scheduled_for, Run.trigger).where(Run.job_id == job_id)
                               .order_by(Run.scheduled_for)).all()
    return [(r.scheduled_for, r.trigger) for r in rows]


def fires_of(sessions: sessionmaker[Session], job_id: UUID) -> list[tuple[datetime, str, str]]:
    with sessions() as session:
        rows = session.scalars(select(Fire).where(Fire.job_id == job_id)
                               .order_by(Fire.fire_at)).all()
        return [(f.fire_at, f.outcome, f.reason) for f in rows]


def test_two_beats_create_exactly_one_run_per_job_and_minute(cron_database: str) -> None:
    engines = [make_engine(cron_database, pool_size=2) for _ in range(2)]
    beats = [make_sessions(engine) for engine in engines]
    job_ids = [cron_job(beats[0], f"every-minute-{i}") for i in range(40)]
    steps = [T0 + timedelta(seconds=20 * k) for k in range(31)]  # ten minutes
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def beat(made: sessionmaker[Session]) -> None:
        try:
            for now in steps:
                barrier.wait(timeout=30)
                tick(made, now)
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=beat, args=(made,)) for made in beats]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for engine in engines:
        engine.dispose()
    assert errors == []
    minutes = [T0.replace(second=0) + MINUTE * m for m in range(1, 11)]
    with make_sessions(make_engine(cron_database))() as session:
        rows = session.execute(select(Run.job_id, Run.scheduled_for)
                               .where(Run.job_id.in_(job_ids))).all()
        outcomes = Counter(session.scalars(select(Fire.outcome)
                                           .where(Fire.job_id.in_(job_ids))).all())
    assert Counter((r.job_id, r.scheduled_for) for r in rows) == Counter(
        {(job_id, minute): 1 for job_id in job_ids for minute in minutes})
    assert outcomes == {"run": len(job_ids) * len(minutes)}


@pytest.mark.parametrize(("catchup", "expected"), [
    ("none", [(10, "schedule")]),
    ("latest", [(9, "catchup"), (10, "schedule")]),
    ("all", [(6, "catchup"), (7, "catchup"), (8, "catchup"), (9, "catchup"), (10, "schedule")]),
])
def test_catchup_after_downtime(
    sessions: sessionmaker[Session], catchup: str, expected: list[tuple[int, str]],
) -> None:
    job_id = cron_job(sessions, f"catchup-{catchup}", catchup=catchup, catchup_window=300)
    now = T0 + MINUTE * 10  # fires at 00:01 ... 00:10; up to 00:09 they are missed
    tick(sessions, now)
    base = T0.replace(second=0)
    assert runs_of(sessions, job_id) == [(base + MINUTE * m, t) for m, t in expected]
    fires = fires_of(sessions, job_id)
    assert [f[0] for f in fires] == [base + MINUTE * m for m in range(1, 11)]
    skipped = [f for f in fires if f[1] == "skipped"]
    assert len(skipped) == 10 - len(expected) and all(reason for _, _, reason in skipped)
    events = [e for e in recorded(sessions, job_id) if e["event"] == "run.skipped"]
    assert sorted(datetime.fromisoformat(e["scheduled_for"]) for e in events) == \
        [f[0] for f in skipped]
    assert tick(sessions, now) == []  # nothing is fired twice


def finish(sessions: sessionmaker[Session], job_id: UUID, state: str = "COMPLETED") -> None:
    """What the engine would do when the job's runs end."""
    with sessions.begin() as session:
        session.execute(update(Run).where(Run.job_id == job_id).values(state=state))


def test_overlap_skip_records_the_skipped_fire(sessions: sessionmaker[Session]) -> None:
    job_id = cron_job(sessions, "overlap-skip", overlap="skip")
    for minute in (1, 2):
        tick(sessions, T0 + MINUTE * minute)
    assert len(runs_of(sessions, job_id)) == 1
    assert [(o, "unfinished" in r) for _, o, r in fires_of(sessions, job_id)] == [
        ("run", False), ("skipped", True)]


def test_overlap_buffer_one_waits_for_the_previous_run(sessions: sessionmaker[Session]) -> None:
    job_id = cron_job(sessions, "overlap-buffer", overlap="buffer_one")
    for minute in (1, 2, 3):
        tick(sessions, T0 + MINUTE * minute)
    assert [o for _, o, _ in fires_of(sessions, job_id)] == ["run", "buffered", "skipped"]
    tick(sessions, T0 + MINUTE * 3 + timedelta(seconds=5))
    assert len(runs_of(sessions, job_id)) == 1  # still unfinished: the fire keeps waiting
    finish(sessions, job_id)
    tick(sessions, T0 + MINUTE * 3 + timedelta(seconds=10))
    base = T0.replace(second=0)
    assert runs_of(sessions, job_id) == [(base + MINUTE, "schedule"),
                                         (base + MINUTE * 2, "schedule")]
    assert [o for _, o, _ in fires_of(sessions, job_id)] == ["run", "run", "skipped"]


def test_overlap_cancel_previous_cancels_then_runs(sessions: sessionmaker[Session]) -> None:
    job_id = cron_job(sessions, "overlap-cancel", overlap="cancel_previous")
    tick(sessions, T0 + MINUTE)
    [(first_run,)] = [(r,) for r in _run_ids(sessions, job_id)]
    ids = tick(sessions, T0 + MINUTE * 2)
    with sessions() as session:
        payloads = [session.get_one(OutboxMessage, i).payload for i in ids]
    assert [p for p in payloads if p.get("signal") == "cancel"] == [
        {**payloads[0], "run_id": str(first_run), "signal": "cancel"}]
    assert [o for _, o, _ in fires_of(sessions, job_id)] == ["run", "buffered"]
    finish(sessions, job_id, "CANCELED")
    tick(sessions, T0 + MINUTE * 2 + timedelta(seconds=5))
    assert [o for _, o, _ in fires_of(sessions, job_id)] == ["run", "run"]
    assert len(runs_of(sessions, job_id)) == 2


def test_a_disabled_job_does_not_fire(sessions: sessionmaker[Session]) -> None:
    job_id = cron_job(sessions, "disabled")
    with sessions.begin() as session:
        session.execute(update(Job).where(Job.id == job_id).values(enabled=False))
    tick(sessions, T0 + MINUTE * 2)
    assert runs_of(sessions, job_id) == []
    with sessions() as session:
        assert session.get_one(Job, job_id).next_fire_at is None


def _run_ids(sessions: sessionmaker[Session], job_id: UUID) -> list[UUID]:
    with sessions() as session:
        return list(session.scalars(select(Run.id).where(Run.job_id == job_id)))
