"""Two engines applying the last predecessors of many joins at the same moment.

Each applier has its own connection pool and caches, as two engine processes would;
a barrier releases both batches together. Every join must be dispatched exactly once.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.messages import Activation, TaskResult
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import JournalEntry, TaskRun
from common.persistence.outbox import OutboxRelay
from scheduler.engine.batch import BatchApplier
from scheduler.engine.incoming import Incoming
from scheduler.engine.loading import RunLoader
from scheduler.engine.structure import StructureCache
from scheduler.services.jobs import create_job

JOINS = 40


def now() -> datetime:
    return datetime.now(UTC)


def applier(settings: Settings) -> tuple[BatchApplier, sessionmaker[Session]]:
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url))
    relay = OutboxRelay(sessions, Publisher(redis.Redis.from_url(redis_url)))
    return BatchApplier(sessions, RunLoader(StructureCache()), relay,
                        settings.lease_ttl, clock=now), sessions


def diamonds_spec() -> JobSpec:
    tasks: list[dict[str, Any]] = []
    for i in range(JOINS):
        tasks += [
            {"name": f"s{i}", "type": "noop", "next": [f"a{i}", f"b{i}"]},
            {"name": f"a{i}", "type": "noop", "next": [f"j{i}"]},
            {"name": f"b{i}", "type": "noop", "next": [f"j{i}"]},
            {"name": f"j{i}", "type": "noop"},
        ]
    return JobSpec.model_validate({"name": "diamonds", "tasks": tasks})


def finished(run_id: uuid.UUID, ids: dict[str, uuid.UUID], names: list[str]) -> list[Incoming]:
    out = []
    for name in names:
        result = TaskResult(task_run_id=ids[name], run_id=run_id, attempt=1, kind="finished",
                            outcome="COMPLETED")
        out.append(Incoming(result.message_id, run_id, result))
    return out


def test_joins_completed_on_two_engines_at_once_are_dispatched_once(
    quiet_settings: Settings,
) -> None:
    first, sessions = applier(quiet_settings)
    second, _ = applier(quiet_settings)
    with sessions.begin() as session:
        run_id = create_job(session, diamonds_spec(), now()).run_id
    assert run_id is not None
    start = Activation(run_id=run_id)
    first.apply([Incoming(start.message_id, run_id, start)])
    with sessions() as session:
        rows = session.execute(select(TaskRun.name, TaskRun.id).where(TaskRun.run_id == run_id))
        ids = {name: task_id for name, task_id in rows}
    first.apply(finished(run_id, ids, [f"s{i}" for i in range(JOINS)]))
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def apply(engine: BatchApplier, names: list[str]) -> None:
        try:
            barrier.wait()
            for name in names:  # one message per batch: the most interleaving
                engine.apply(finished(run_id, ids, [name]))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [
        threading.Thread(target=apply, args=(first, [f"a{i}" for i in range(JOINS)])),
        threading.Thread(target=apply, args=(second, [f"b{i}" for i in range(JOINS)])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    with sessions() as session:
        ready = session.execute(
            select(JournalEntry.task, func.count()).where(
                JournalEntry.run_id == run_id, JournalEntry.to_state == "READY",
                JournalEntry.task.like("j%"),
            ).group_by(JournalEntry.task)
        ).all()
    assert len(ready) == JOINS
    assert all(count == 1 for _, count in ready), ready
