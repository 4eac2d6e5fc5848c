"""Detached attempts (a web service or a post-back completes them) against real PostgreSQL.

A detached ``started``/``heartbeat`` clears the attempt's lease and sets its deadline
one timeout ahead; the beat's timeout duty then ends it TIMEOUT. A late ordinary
heartbeat must not tie it to a lease again, or it would be requeued and run twice.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.messages import Activation, TaskResult
from common.persistence.models import OutboxMessage, TaskRun
from scheduler.beat import duties
from scheduler.engine.batch import BatchApplier
from scheduler.engine.incoming import Incoming
from scheduler.services.jobs import create_job

from .test_concurrent_joins import applier

TIMEOUT_S = 600


def started_run(
    settings: Settings, **task: Any
) -> tuple[BatchApplier, sessionmaker[Session], uuid.UUID, uuid.UUID]:
    engine, sessions = applier(settings)
    spec = JobSpec.model_validate({"name": f"detached-{uuid.uuid4().hex[:8]}", "tasks": [
        {"name": "a", "type": "unserved-ws", "timeout": TIMEOUT_S, **task}]})
    with sessions.begin() as session:
        run_id = create_job(session, spec, datetime.now(UTC)).run_id
    assert run_id is not None
    start = Activation(run_id=run_id)
    engine.apply([Incoming(start.message_id, run_id, start)])
    with sessions() as session:
        task_id = session.scalar(select(TaskRun.id).where(TaskRun.run_id == run_id))
    assert task_id is not None
    return engine, sessions, run_id, task_id


def report(engine: BatchApplier, run_id: uuid.UUID, task_id: uuid.UUID, kind: str, *,
           detached: bool = False, attempt: int = 1) -> None:
    result = TaskResult(task_run_id=task_id, run_id=run_id, attempt=attempt, kind=kind,
                        worker="connector-1", detached=detached)
    assert engine.apply([Incoming(result.message_id, run_id, result)]).applied == 1


def row(sessions: sessionmaker[Session], task_id: uuid.UUID) -> TaskRun:
    with sessions() as session:
        found = session.get(TaskRun, task_id)
        assert found is not None
        session.expunge(found)
        return found


def signals(session: Session, ids: list[int]) -> list[Activation]:
    """The activations the outbox rows ``ids`` carry."""
    payloads = session.scalars(select(OutboxMessage.payload).where(OutboxMessage.id.in_(ids)))
    return [Activation.model_validate(p) for p in payloads]


def test_a_detached_start_holds_the_attempt_by_its_timeout_not_a_lease(
    quiet_settings: Settings,
) -> None:
    engine, sessions, run_id, task_id = started_run(quiet_settings)
    before = datetime.now(UTC)
    report(engine, run_id, task_id, "started", detached=True)
    first = row(sessions, task_id)
    assert (first.state, first.detached, first.lease_expires_at, first.worker) == (
        "ACTIVE", True, None, "connector-1")
    assert first.deadline_at is not None
    assert before + timedelta(seconds=TIMEOUT_S) <= first.deadline_at
    assert first.deadline_at <= datetime.now(UTC) + timedelta(seconds=TIMEOUT_S)

    report(engine, run_id, task_id, "heartbeat", detached=True)
    renewed = row(sessions, task_id)
    assert renewed.deadline_at is not None and renewed.deadline_at > first.deadline_at
    assert renewed.lease_expires_at is None


def test_a_late_ordinary_heartbeat_does_not_reattach_it(quiet_settings: Settings) -> None:
    engine, sessions, run_id, task_id = started_run(quiet_settings)
    report(engine, run_id, task_id, "started")  # an ordinary worker start: a lease
    assert row(sessions, task_id).lease_expires_at is not None
    report(engine, run_id, task_id, "heartbeat", detached=True)  # then accepted
    detached = row(sessions, task_id)
    assert (detached.detached, detached.lease_expires_at) == (True, None)
    report(engine, run_id, task_id, "heartbeat")  # an older heartbeat, applied late
    report(engine, run_id, task_id, "started")
    after = row(sessions, task_id)
    assert (after.state, after.detached, after.lease_expires_at, after.deadline_at) == (
        "ACTIVE", True, None, detached.deadline_at)
    # A second engine, which loads the run from the database, sees it detached too.
    fresh, _ = applier(quiet_settings)
    report(fresh, run_id, task_id, "heartbeat")
    assert row(sessions, task_id).lease_expires_at is None


def test_the_beat_times_a_silent_detached_attempt_out_and_a_retry_starts_attached(
    quiet_settings: Settings,
) -> None:
    engine, sessions, run_id, task_id = started_run(quiet_settings, retries=1, retry_backoff=0)
    report(engine, run_id, task_id, "started", detached=True)
    deadline = row(sessions, task_id).deadline_at
    assert deadline is not None
    # The duty is global: the other tests' detached attempts, started earlier, are due
    # a second before this one's deadline too (on a busy machine) and again after it.
    with sessions.begin() as session:
        early = signals(session, duties.time_out_attempts(session, deadline - timedelta(seconds=1)))
    assert [s for s in early if s.run_id == run_id] == []
    assert row(sessions, task_id).deadline_at == deadline  # not claimed early
    with sessions.begin() as session:
        late = signals(session, duties.time_out_attempts(session, deadline + timedelta(seconds=1)))
    (signal,) = [s for s in late if s.run_id == run_id]
    assert (signal.signal, signal.task, signal.attempt) == ("task_timeout", "a", 1)
    engine.apply([Incoming(signal.message_id, run_id, signal)])
    failed = row(sessions, task_id)
    assert (failed.state, failed.detached) == ("SOFT_FAILED", True)
    assert failed.retry_at is not None

    due = Activation(run_id=run_id, signal="retry_due", task="a", attempt=1)
    engine.apply([Incoming(due.message_id, run_id, due)])
    retried = row(sessions, task_id)
    assert (retried.state, retried.attempt, retried.detached) == ("READY", 2, False)
    report(engine, run_id, task_id, "started", attempt=2)  # an ordinary worker this time
    attached = row(sessions, task_id)
    assert (attached.detached, attached.lease_expires_at is not None) == (False, True)
