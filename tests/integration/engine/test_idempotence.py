"""Every consumer is idempotent: a redelivered or repeated message changes nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import func, select

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.messages import Activation, TaskResult
from common.persistence.models import JournalEntry, OutboxMessage, TaskLog, TaskRun
from scheduler.engine.incoming import Incoming
from scheduler.services.jobs import create_job

from .test_concurrent_joins import applier


def counts(sessions: object, run_id: object, task_id: object) -> tuple[int, int]:
    with sessions() as session:  # type: ignore[operator]
        journal = session.scalar(select(func.count()).where(JournalEntry.run_id == run_id))
        logs = session.scalar(select(func.count()).where(TaskLog.task_run_id == task_id))
    return journal, logs


def test_a_redelivered_or_repeated_result_changes_nothing(quiet_settings: Settings) -> None:
    engine, sessions = applier(quiet_settings)
    spec = JobSpec.model_validate({"name": f"idem-{uuid.uuid4().hex[:8]}", "tasks": [
        {"name": "a", "type": "noop", "next": ["b"]}, {"name": "b", "type": "noop"}]})
    with sessions.begin() as session:
        run_id = create_job(session, spec, datetime.now(UTC)).run_id
    assert run_id is not None
    start = Activation(run_id=run_id)
    engine.apply([Incoming(start.message_id, run_id, start)])
    with sessions() as session:
        task_a = session.scalar(select(TaskRun.id).where(TaskRun.run_id == run_id,
                                                         TaskRun.name == "a"))
    assert task_a is not None

    def result() -> TaskResult:
        return TaskResult(task_run_id=task_a, run_id=run_id, attempt=1, kind="finished",
                          outcome="COMPLETED", logs=[{"at": datetime.now(UTC), "line": "hi"}])

    first = result()
    outcome = engine.apply([Incoming(first.message_id, run_id, first)])
    assert outcome.applied == 1 and len(outcome.outbox_ids) >= 1  # b dispatched
    before = counts(sessions, run_id, task_a)
    assert before[1] == 1
    again = engine.apply([Incoming(first.message_id, run_id, first)])  # redelivered
    assert (again.applied, again.duplicates, again.outbox_ids) == (0, 1, [])
    repeated = result()  # the same outcome sent again under a new message id
    later = engine.apply([Incoming(repeated.message_id, run_id, repeated)])
    assert later.applied == 1
    assert counts(sessions, run_id, task_a) == before


def test_published_outbox_rows_are_deleted_by_the_next_batch_or_when_idle(
    quiet_settings: Settings,
) -> None:
    engine, sessions = applier(quiet_settings)
    def start_a_run() -> list[int]:
        spec = JobSpec.model_validate({"name": f"forget-{uuid.uuid4().hex[:8]}",
                                       "tasks": [{"name": "a", "type": "noop"}]})
        with sessions.begin() as session:
            run_id = create_job(session, spec, datetime.now(UTC)).run_id
        assert run_id is not None
        start = Activation(run_id=run_id)
        ids = engine.apply([Incoming(start.message_id, run_id, start)]).outbox_ids
        assert ids  # the dispatch of a and the run.started event
        return ids

    def remaining(ids: list[int]) -> int:
        with sessions() as session:
            return len(session.scalars(select(OutboxMessage.id)
                                       .where(OutboxMessage.id.in_(ids))).all())

    first = start_a_run()
    assert remaining(first) == len(first)  # published, deleted later
    second = start_a_run()
    assert remaining(first) == 0  # by the next batch's transaction
    engine.flush()
    assert remaining(second) == 0  # by the idle flush
