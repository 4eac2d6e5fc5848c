"""The beat's handoff: a run due before the next tick starts at its time, not earlier."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import redis
from sqlalchemy import select

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.messages import ACTIVATION_QUEUE
from common.messaging.publisher import Publisher
from common.messaging.wire import open_envelope
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import OutboxMessage
from common.persistence.outbox import OutboxRelay
from scheduler.beat.ticker import Ticker
from scheduler.services.jobs import create_job


def test_a_run_due_within_the_lookahead_is_activated_at_its_time(
    quiet_settings: Settings, own_database: str,
) -> None:
    redis_url = quiet_settings.require_urls()[1]
    sessions = make_sessions(make_engine(own_database))
    client = redis.Redis.from_url(redis_url)
    due = datetime.now(UTC) + timedelta(milliseconds=700)
    spec = JobSpec.model_validate({
        "name": "handoff", "schedule": {"at": due.isoformat()},
        "tasks": [{"name": "a", "type": "noop"}],
    })
    with sessions.begin() as session:
        created = create_job(session, spec, datetime.now(UTC))
    ticker = Ticker(sessions, OutboxRelay(sessions, Publisher(client)), timedelta(seconds=1),
                    clock=lambda: datetime.now(UTC), fire_crons=False)

    ticker.tick()  # writes the activation, timed: nothing published yet

    assert not _activations(client, created.run_id)
    with sessions() as session:
        (row,) = session.scalars(select(OutboxMessage).where(
            OutboxMessage.payload["run_id"].astext == str(created.run_id))).all()
    assert row.due_at == due
    arrived = _wait_for_activation(client, created.run_id)
    assert due <= arrived < due + timedelta(milliseconds=100)
    ticker.tick()  # deletes the rows the handoff has sent
    with sessions() as session:
        assert session.get(OutboxMessage, row.id) is None


def _activations(client: redis.Redis, run_id: object) -> list[object]:
    raw = client.lrange(ACTIVATION_QUEUE, 0, -1)
    return [m for m in (open_envelope(r) for r in raw) if m.payload["run_id"] == str(run_id)]


def _wait_for_activation(client: redis.Redis, run_id: object) -> datetime:
    deadline = time.monotonic() + 5
    while not _activations(client, run_id):
        assert time.monotonic() < deadline, "the timed activation was never published"
        time.sleep(0.002)
    return datetime.now(UTC)
