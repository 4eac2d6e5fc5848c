"""The notify runner waits out a stopped PostgreSQL and a stopped Redis (issue 13).

On servers of this module's own (the session's must stay up): stopped and started
again under a running notify runner, whose loops must neither exit nor lose an event.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from common.config import Settings
from common.embedded import stop_postgres, stop_redis
from common.persistence.db import make_engine, make_sessions
from common.persistence.migrate import upgrade
from scheduler.notify.main import NotifyRunner
from tests.integration.notify.conftest import Notify, event, running
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.integration
BACK_WITHIN_S = 10.0  # restart of the server included


@pytest.fixture(scope="module")
def servers() -> Iterator[Path]:
    """A PostgreSQL and a Redis under a directory of the module's own, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="stellwerk-outage-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        try:
            yield root
        finally:
            stop_redis(root / "redis")
            stop_postgres(root / "pg")


@pytest.fixture(scope="module")
def outage_notify(servers: Path, notify_settings: Settings) -> Iterator[Notify]:
    database_url = start(servers, "postgres")
    redis_url = start(servers, "redis")
    upgrade(database_url)
    settings = notify_settings.model_copy(
        update={"database_url": database_url, "redis_url": redis_url})
    engine = make_engine(database_url)
    client = redis.Redis.from_url(redis_url)
    yield Notify(settings, make_sessions(engine), client)
    client.close()
    engine.dispose()


def start(servers: Path, kind: str) -> str:
    """Start (again) the module's PostgreSQL or Redis from another process; return its URL.

    Not a child of this one: a server that is a child of the test process stays a zombie
    once stopped, and ``launch_postgres`` would take it for a live one.
    """
    directory = servers / ("pg" if kind == "postgres" else "redis")
    code = (f"from pathlib import Path; from common.embedded import launch_{kind}; "
            f"print(launch_{kind}(Path({str(directory)!r}), keep_running=True).url)")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip().splitlines()[-1]


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = BACK_WITHIN_S) -> None:
    """Poll a condition that no event announces (an outage seen by a loop)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s} s"
        time.sleep(0.02)


def alive(runner: NotifyRunner) -> bool:
    """Whether the runner's loops still run: the runner stops both when the intake ends."""
    return not runner.stopping.is_set()


def test_the_runner_waits_out_a_stopped_redis_and_a_stopped_postgresql(
    outage_notify: Notify, servers: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    notify, app, run_id = outage_notify, uuid.uuid4().hex, uuid.uuid4()
    caplog.set_level(logging.WARNING, logger="stellwerk.notify")
    with Receiver() as receiver, running(notify.settings) as runner:
        notify.subscribe({"events": ["run.*"], "selector": {"application": app},
                          "target": {"webhook": {"url": receiver.url, "secret": "s"}}})
        intake_db, intake_redis = runner.intake.outages

        stop_redis(servers / "redis")
        notify.publish(event("run.started", uuid.uuid4(), run_id, application=app))
        receiver.wait_for(1)  # delivered without Redis: only the live stream missed it
        wait_until(lambda: not intake_redis.healthy, "the Redis outage")
        start(servers, "redis")
        wait_until(lambda: intake_redis.healthy, "the end of the Redis outage")

        stop_postgres(servers / "pg")
        wait_until(lambda: not intake_db.healthy, "the PostgreSQL outage")
        assert alive(runner)
        start(servers, "postgres")
        back = time.monotonic()
        notify.publish(event("run.completed", uuid.uuid4(), run_id, application=app))
        requests = receiver.wait_for(2, timeout_s=BACK_WITHIN_S)
        resumed_s = time.monotonic() - back
        wait_until(lambda: all(o.healthy for o in runner.outages), "every loop's recovery")
        assert alive(runner)

    assert [r.event for r in requests] == ["run.started", "run.completed"]
    assert resumed_s < BACK_WITHIN_S
    lines = [r.getMessage() for r in caplog.records]
    assert sum("Redis is unreachable" in line for line in lines) == 1  # the intake's
    assert sum("Redis is back" in line for line in lines) == 1
    down = sum("PostgreSQL is unreachable" in line for line in lines)
    assert 1 <= down <= len(runner.outages) - 1  # once per loop that saw it, at most
    assert sum("PostgreSQL is back" in line for line in lines) == down
