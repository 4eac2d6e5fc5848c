"""Notify events live in PostgreSQL (issue 13): Redis may lose everything, a runner may die.

Each test records its own events for a subscription of its own (a fresh application
name), on the module's database and Redis database.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from common.domain.spec import JobSpec
from common.messaging.messages import Event, utcnow
from common.persistence.db import driver, libpq_url
from common.persistence.queries import LOCK_NOTIFY_INTAKE, TAKE_NOTIFY_EVENTS
from scheduler.notify.intake import INTAKE_LOCK
from scheduler.notify.recording import record_deliveries
from scheduler.services.jobs import create_job
from tests.conftest import SESSION_MARKER
from tests.integration.notify.conftest import Notify, event, running
from tests.webhook_receiver import Received, Receiver

pytestmark = pytest.mark.integration


def hook(url: str, app: str, events: list[str]) -> dict[str, Any]:
    return {"events": events, "selector": {"application": app},
            "target": {"webhook": {"url": url, "secret": "s"}}}


def flush_redis(notify: Notify) -> None:
    """Redis restarted empty: the module keeps its claim on the database index."""
    notify.redis.flushdb()
    notify.redis.set(SESSION_MARKER, "notify-tests")


def by_run(requests: list[Received]) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = defaultdict(list)
    for request in requests:
        runs[request.json["run_id"]].append(request.json["id"])
    return dict(runs)


def test_the_events_of_a_change_survive_a_redis_flush_and_are_delivered(notify: Notify) -> None:
    app = uuid.uuid4().hex
    spec = JobSpec.model_validate({"name": "durable", "application": app,
                                   "tasks": [{"name": "a", "type": "noop"}]})
    with Receiver() as receiver:
        notify.subscribe(hook(receiver.url, app, ["run.*", "job.*"]))
        with notify.sessions.begin() as session:  # no runner is running
            created = create_job(session, spec, datetime.now(UTC))
        flush_redis(notify)
        with running(notify.settings):
            requests = receiver.wait_for(2)

    assert [(r.event, r.json["job_id"]) for r in requests] == [
        ("run.scheduled", str(created.job_id)), ("job.created", str(created.job_id))]
    assert requests[0].json["run_id"] == str(created.run_id)
    assert notify.pending() == 0


def test_two_runners_deliver_every_event_once_in_the_order_of_its_run(notify: Notify) -> None:
    app = uuid.uuid4().hex
    runs = [uuid.uuid4() for _ in range(4)]
    recorded: dict[str, list[str]] = defaultdict(list)
    with Receiver() as receiver:
        notify.subscribe(hook(receiver.url, app, ["task.*"]))
        with running(notify.settings), running(notify.settings):
            for n in range(15):  # one row per change, the runs' changes interleaved
                for run_id in runs:
                    sent = event("task.ready", uuid.uuid4(), run_id, application=app, attempt=n)
                    notify.publish(sent)
                    recorded[str(run_id)].append(str(sent.id))
            requests = receiver.wait_for(60)
        sent_once = len(receiver.requests)  # the runners have stopped: nothing more comes

    assert sent_once == 60
    assert by_run(requests) == recorded


def test_a_runner_killed_before_its_commit_leaves_its_rows_to_the_next(notify: Notify) -> None:
    app, run_id = uuid.uuid4().hex, uuid.uuid4()
    with Receiver() as receiver:
        notify.subscribe(hook(receiver.url, app, ["run.*"]))
        sent = [event(name, uuid.uuid4(), run_id, application=app)
                for name in ("run.started", "run.paused", "run.resumed")]
        notify.publish(*sent[:2])
        notify.publish(sent[2])
        with notify.sessions() as session:  # a runner that takes the rows...
            conn = driver(session)
            conn.execute(LOCK_NOTIFY_INTAKE, (INTAKE_LOCK,))
            rows = conn.execute(TAKE_NOTIFY_EVENTS, (100,)).fetchall()
            record_deliveries(session, [Event.model_validate(e) for _, r in rows for e in r],
                              utcnow())
            pid = conn.info.backend_pid
            with running(notify.settings):  # ...blocks the other, and is killed
                _terminate(notify, pid)
                requests = receiver.wait_for(3)
            session.invalidate()

    assert [r.json["id"] for r in requests] == [str(e.id) for e in sent]
    assert notify.pending() == 0


def _terminate(notify: Notify, pid: int) -> None:
    url = libpq_url(notify.settings.require_urls()[0])
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
