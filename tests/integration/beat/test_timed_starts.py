"""A run due before the beat's next tick: its activation waits in Redis, taken at its time.

The beat relays the timed outbox row at once, into the activation queue's timed set; an
engine's reader takes it once due by its own clock, never earlier. How late it is taken
is measured in bench/, not asserted here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import redis
from sqlalchemy import select

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.messages import ACTIVATION_QUEUE
from common.messaging.publisher import Publisher, timed_set
from common.messaging.reliable import BatchReader
from common.messaging.wire import open_envelope
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import OutboxMessage
from common.persistence.outbox import OutboxRelay
from scheduler.beat.ticker import Ticker
from scheduler.services.jobs import create_job


def test_a_run_due_within_the_lookahead_is_taken_at_its_time(
    quiet_settings: Settings, own_database: str,
) -> None:
    redis_url = quiet_settings.require_urls()[1]
    sessions = make_sessions(make_engine(own_database))
    client = redis.Redis.from_url(redis_url)
    now = datetime.now(UTC)
    due = now + timedelta(milliseconds=200)
    spec = JobSpec.model_validate({
        "name": "timed-start", "schedule": {"at": due.isoformat()},
        "tasks": [{"name": "a", "type": "noop"}],
    })
    with sessions.begin() as session:
        created = create_job(session, spec, now)
    ticker = Ticker(sessions, OutboxRelay(sessions, Publisher(client)), timedelta(seconds=1),
                    clock=lambda: now, fire_crons=False)

    ticker.tick()  # writes the activation, timed, and relays it into the timed set

    with sessions() as session:
        rows = session.scalars(select(OutboxMessage).where(
            OutboxMessage.payload["run_id"].astext == str(created.run_id))).all()
    assert rows == []
    scored = client.zrange(timed_set(ACTIVATION_QUEUE), 0, -1, withscores=True)
    timed = {open_envelope(raw).payload["run_id"]: score
             for raw, score in cast(list[tuple[bytes, float]], scored)}
    assert timed[str(created.run_id)] == due.timestamp() * 1000
    clock = Reading(due - timedelta(milliseconds=1))
    reader = BatchReader(client, [ACTIVATION_QUEUE], owner=f"test-{created.run_id}", clock=clock)
    assert str(created.run_id) not in _run_ids(reader.take_more(1000))
    clock.now = due
    taken = reader.ack(take_next=1000)
    assert str(created.run_id) in _run_ids(taken)
    reader.ack()


class Reading:
    """A reader's clock, set by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now.timestamp()


def _run_ids(raws: list[bytes]) -> set[object]:
    return {open_envelope(raw).payload.get("run_id") for raw in raws}
