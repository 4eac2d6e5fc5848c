"""A notify runner on a database and a Redis database of the module's own.

The e2e system's real notify runner works on the session's database and Redis: it
would take these tests' messages and claim their deliveries.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.subscriptions import SubscriptionSpec
from common.messaging.messages import Event, utcnow
from common.persistence.db import make_engine, make_sessions
from common.persistence.migrate import upgrade
from common.persistence.models import Delivery, DeliveryAttempt, NotifyEvents
from common.persistence.notify_events import record_events
from common.secure_params import SecretBox
from scheduler.notify.egress_transport import webhook_client
from scheduler.notify.main import NotifyRunner, build_runner
from scheduler.services.access import Principal
from scheduler.services.subscriptions import create_subscription
from tests.conftest import scratch_database

ADMIN = Principal("admin", frozenset({"job"}))
Log = list[tuple[Delivery, list[DeliveryAttempt]]]  # deliveries in order, with their tries


@pytest.fixture(scope="module")
def notify_settings(server_urls: tuple[str, str], quiet_settings: Settings) -> Iterator[Settings]:
    """Quick retries (50 ms, doubling to 200 ms), three tries, a 2 s send timeout."""
    with scratch_database(server_urls[0]) as url:
        upgrade(url)
        yield quiet_settings.model_copy(update={
            "database_url": url, "webhook_retry_base_s": 0.05, "webhook_retry_max_s": 0.2,
            "webhook_max_attempts": 3, "webhook_timeout_s": 2.0, "notify_concurrency": 4,
        })


@dataclass
class Notify:
    """Recording events, subscribing, and reading deliveries on the module's servers."""

    settings: Settings
    sessions: sessionmaker[Session]
    redis: redis.Redis

    def publish(self, *events: Event) -> list[Event]:
        """Record the events as a state change does (one row, one transaction)."""
        with self.sessions.begin() as session:
            record_events(session, events)
        return list(events)

    def pending(self) -> int:
        """Rows of events no runner has taken yet."""
        with self.sessions() as session:
            return len(session.scalars(select(NotifyEvents.id)).all())

    def subscribe(self, body: dict[str, Any]) -> uuid.UUID:
        spec = SubscriptionSpec.model_validate(body)
        with self.sessions.begin() as session:
            created = create_subscription(session, ADMIN, spec,
                                          secrets=SecretBox(self.settings.secret_key))
            return created.id

    def deliveries(self, subscription_id: uuid.UUID) -> Log:
        with self.sessions() as session:
            rows = session.scalars(select(Delivery).where(
                Delivery.subscription_id == subscription_id).order_by(Delivery.seq)).all()
            return [(row, list(session.scalars(
                select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == row.id)
                .order_by(DeliveryAttempt.number)))) for row in rows]

    def wait_deliveries(
        self, subscription_id: uuid.UUID, done: Callable[[Log], bool], timeout_s: float = 20,
    ) -> Log:
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.deliveries(subscription_id)
            if done(found):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"deliveries did not get there: {_states(found)}")
            time.sleep(0.05)


def _states(found: Log) -> list[tuple[str, str, int]]:
    return [(d.event, d.state, len(a)) for d, a in found]


@pytest.fixture(scope="module")
def notify(notify_settings: Settings) -> Iterator[Notify]:
    database_url, redis_url = notify_settings.require_urls()
    engine = make_engine(database_url)
    client = redis.Redis.from_url(redis_url)
    yield Notify(notify_settings, make_sessions(engine), client)
    client.close()
    engine.dispose()


@contextlib.contextmanager
def running(settings: Settings) -> Iterator[NotifyRunner]:
    """A notify runner on a thread, stopped (in-flight deliveries finished) afterwards."""
    with webhook_client(settings.egress, settings.webhook_timeout) as http:
        runner = build_runner(settings, http)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        try:
            yield runner
        finally:
            runner.stopping.set()
            thread.join(30)
            assert not thread.is_alive(), "the notify runner did not stop"


@pytest.fixture
def runner(notify_settings: Settings) -> Iterator[NotifyRunner]:
    with running(notify_settings) as started:
        yield started


def event(name: str, job_id: uuid.UUID, run_id: uuid.UUID | None = None, **fields: Any) -> Event:
    return Event(event=name, at=utcnow(), job_id=job_id, job_name="j", run_id=run_id, **fields)
