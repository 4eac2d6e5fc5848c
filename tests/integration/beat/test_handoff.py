"""The beat's handoff: a run due before the next tick starts at its time, not earlier.

The beat's clock is the test's: how late a timed row goes out is measured in bench/,
not asserted here (a busy machine delays any thread by more than a tight bound).
"""

from __future__ import annotations

import queue
import threading
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


class Clock:
    """The beat's clock, moved by the test; tells what the handoff thread read from it."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.read: queue.Queue[datetime] = queue.Queue()

    def __call__(self) -> datetime:
        now = self.now
        if threading.current_thread().name == "handoff":
            self.read.put(now)
        return now

    def read_by_handoff(self, now: datetime) -> None:
        """Return once the handoff thread has read ``now`` from the clock."""
        while self.read.get(timeout=10) != now:
            pass


def test_a_run_due_within_the_lookahead_is_activated_at_its_time(
    quiet_settings: Settings, own_database: str,
) -> None:
    redis_url = quiet_settings.require_urls()[1]
    sessions = make_sessions(make_engine(own_database))
    client = redis.Redis.from_url(redis_url)
    clock = Clock(datetime.now(UTC))
    due = clock.now + timedelta(milliseconds=200)
    spec = JobSpec.model_validate({
        "name": "handoff", "schedule": {"at": due.isoformat()},
        "tasks": [{"name": "a", "type": "noop"}],
    })
    with sessions.begin() as session:
        created = create_job(session, spec, clock.now)
    ticker = Ticker(sessions, OutboxRelay(sessions, Publisher(client)), timedelta(seconds=1),
                    clock=clock, fire_crons=False)

    ticker.tick()  # writes the activation, timed: nothing published yet

    with sessions() as session:
        (row,) = session.scalars(select(OutboxMessage).where(
            OutboxMessage.payload["run_id"].astext == str(created.run_id))).all()
    assert row.due_at == due
    # The handoff reads the clock, waits until the row is due by it, and reads it again.
    clock.now = due - timedelta(milliseconds=1)
    clock.read_by_handoff(clock.now)  # and found the row not due yet
    assert not _activations(client, created.run_id)
    clock.now = due  # published by the handoff's timer, without another tick
    _wait_for_activation(client, created.run_id)
    ticker.tick()  # deletes the rows the handoff has sent
    with sessions() as session:
        assert session.get(OutboxMessage, row.id) is None


def _activations(client: redis.Redis, run_id: object) -> list[object]:
    raw = client.lrange(ACTIVATION_QUEUE, 0, -1)
    return [m for m in (open_envelope(r) for r in raw) if m.payload["run_id"] == str(run_id)]


def _wait_for_activation(client: redis.Redis, run_id: object) -> None:
    deadline = time.monotonic() + 10
    while not _activations(client, run_id):
        assert time.monotonic() < deadline, "the timed activation was never published"
        time.sleep(0.01)
