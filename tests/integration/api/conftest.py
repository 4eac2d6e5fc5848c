"""The API under test: one app per session on a PostgreSQL and a Redis database of its own.

The app publishes to a Redis database of its own, claimed like the session's (an empty
index marked with SET NX), and writes to a database of its own, so that the activations
and notify events it records are neither consumed nor counted by other tests (the e2e
system's engine and notify runner work on the session's), and theirs not by these.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.messaging.messages import Activation
from common.persistence.db import make_engine, make_sessions
from common.persistence.migrate import upgrade
from common.persistence.models import Job, NotifyEvents
from scheduler.api.app import create_app
from scheduler.engine.batch import BatchApplier
from scheduler.engine.incoming import Incoming
from tests.conftest import claim_redis_db, scratch_database

TOKEN = "test-admin"  # the admin token of the ``settings`` fixture
FROZEN_AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="session")
def api_settings(
    settings: Settings, server_urls: tuple[str, str], redis_url: str,
) -> Iterator[Settings]:
    """The session's settings on a database and a Redis database of the API tests' own."""
    url = claim_redis_db(redis_url)
    with scratch_database(server_urls[0]) as database_url:
        upgrade(database_url)
        yield settings.model_copy(update={"redis_url": url, "database_url": database_url})
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        client.flushdb()


@pytest.fixture(scope="session")
def client(api_settings: Settings) -> Iterator[TestClient]:
    """An authenticated client; entering it runs the app's lifespan."""
    with TestClient(create_app(api_settings), headers=auth_headers()) as c:
        yield c


@pytest.fixture(scope="session")
def anonymous(api_settings: Settings) -> Iterator[TestClient]:
    """A client without a token."""
    with TestClient(create_app(api_settings)) as c:
        yield c


@pytest.fixture
def frozen_client(api_settings: Settings) -> Iterator[TestClient]:
    """An authenticated client of an app whose clock stands still at ``FROZEN_AT``."""
    app = create_app(api_settings, clock=lambda: FROZEN_AT)
    with TestClient(app, headers=auth_headers()) as c:
        yield c


Queued = Callable[[str], list[dict[str, Any]]]
Recorded = Callable[[], list[dict[str, Any]]]


@pytest.fixture
def recorded(sessions: sessionmaker[Session]) -> Recorded:
    """The events recorded for notify (no runner takes them here): rows newest first.

    The events of one row (one call of ``record_events``) keep their order.
    """

    def read() -> list[dict[str, Any]]:
        with sessions() as session:
            rows = session.scalars(select(NotifyEvents.events).order_by(NotifyEvents.id.desc()))
            return [event for events in rows for event in events]

    return read


@pytest.fixture
def queued(rds: redis.Redis) -> Queued:
    """The payloads waiting in a queue, newest first, decoded from Celery's wire format."""

    def read(queue: str) -> list[dict[str, Any]]:
        payloads = []
        for raw in rds.lrange(queue, 0, -1):
            envelope = json.loads(raw)
            args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
            payloads.append({"task": envelope["headers"]["task"],
                             "id": envelope["headers"]["id"], "payload": args[0]})
        return payloads

    return read


def auth_headers() -> dict[str, str]:
    """The admin token's header."""
    return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="session")
def db_engine(api_settings: Settings) -> Iterator[Engine]:
    """A separate engine for checking what the API wrote."""
    engine = make_engine(api_settings.require_urls()[0])
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def sessions(db_engine: Engine) -> sessionmaker[Session]:
    """Sessions on the test engine."""
    return make_sessions(db_engine)


@pytest.fixture(scope="session")
def rds(api_settings: Settings) -> Iterator[redis.Redis]:
    """A Redis client on the API's Redis database."""
    client = redis.Redis.from_url(api_settings.require_urls()[1])
    yield client
    client.close()


JobBody = Callable[..., dict[str, Any]]


@pytest.fixture
def job_count(sessions: sessionmaker[Session]) -> Callable[[], int]:
    """How many jobs the database holds, when called."""

    def count() -> int:
        with sessions() as session:
            return int(session.scalar(select(func.count()).select_from(Job)) or 0)

    return count


@pytest.fixture
def job_body() -> JobBody:
    """Builds a valid three-task job (a → b → c) with overrides applied."""
    return _job_body


def _job_body(**overrides: Any) -> dict[str, Any]:
    """A name of its own each time: a name names one job of its tenant."""
    body: dict[str, Any] = {
        "name": f"backup-{uuid.uuid4().hex[:8]}",
        "application": "tests",
        "tasks": [
            {"name": "a", "type": "noop", "next": ["b"]},
            {"name": "b", "type": "noop", "next": ["c"], "retries": 2, "timeout": 60},
            {"name": "c", "type": "shell", "params": {"argv": ["true"]}},
        ],
    }
    body.update(overrides)
    return body


@pytest.fixture(scope="module")
def engine(api_settings: Settings) -> BatchApplier:
    """An engine in this process, publishing to the API tests' Redis database."""
    from tests.integration.engine.test_concurrent_joins import applier

    return applier(api_settings)[0]


def start_run(engine: BatchApplier, run_id: str) -> None:
    """Start a READY run as the engine does on its activation."""
    activation = Activation(run_id=uuid.UUID(run_id))
    engine.apply([Incoming(activation.message_id, activation.run_id, activation)])


def wait_for_a_lock_wait(settings: Settings) -> None:
    """Until a backend of the API's database waits for a lock: a request that met a
    row another transaction wrote and has not committed."""
    assert settings.database_url is not None
    deadline = time.monotonic() + 30
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        while conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'").fetchone() == (0,):
            assert time.monotonic() < deadline, "no request waited for a lock"
            time.sleep(0.02)  # nothing to await: a lock wait is only seen by asking
