"""Producers create and delete jobs and subscriptions through ``stellwerk.jobs``.

Requests are sent as a producer would, with a plain ``celery.Celery`` app's
``send_task``; answers are read from the producer's ``reply_to`` list and from
the events recorded for notify (no notify runner works on this module's database).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.messaging.messages import EVENT_TASK
from common.messaging.wire import open_envelope
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import Job, NotifyEvents, Run, Subscription
from scheduler.api.app import create_app
from scheduler.producers.consumer import RequestConsumer

pytestmark = pytest.mark.integration
ANSWER_TIMEOUT_S = 20
ADMIN_TOKEN = "test-admin"  # the admin token of the ``settings`` fixture


@pytest.fixture(scope="module")
def rds(own_settings: Settings) -> Iterator[redis.Redis]:
    with contextlib.closing(redis.Redis.from_url(str(own_settings.redis_url))) as client:
        yield client


@pytest.fixture(scope="module")
def sessions(own_settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(str(own_settings.database_url))
    yield make_sessions(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def producer(own_settings: Settings, consumer: RequestConsumer) -> Celery:
    """A producer that knows nothing of Stellwerk but the queue's name."""
    return Celery("producer", broker=own_settings.redis_url, set_as_current=False)


@pytest.fixture
def reply_to() -> str:
    return f"replies-{uuid.uuid4().hex[:8]}"


def send(producer: Celery, request: dict[str, Any]) -> None:
    producer.send_task("stellwerk.jobs", args=[request], queue="stellwerk.jobs")


def request(kind: str, reply_to: str | None, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "request_id": f"req-{uuid.uuid4().hex[:8]}",
            "message_id": str(uuid.uuid4()), "reply_to": reply_to, **fields}


def answer(rds: redis.Redis, queue: str) -> dict[str, Any]:
    """The next event on the reply queue, as a Celery ``stellwerk.event`` message."""
    popped = rds.brpop([queue], timeout=ANSWER_TIMEOUT_S)
    assert popped is not None, f"no answer on {queue}"
    received = open_envelope(popped[1])
    assert received.task_name == EVENT_TASK
    assert isinstance(received.payload, dict)
    return received.payload


def ask(producer: Celery, rds: redis.Redis, req: dict[str, Any]) -> dict[str, Any]:
    send(producer, req)
    event = answer(rds, req["reply_to"])
    assert event["request_id"] == req["request_id"]
    return event


def notified(sessions: sessionmaker[Session], request_id: str) -> list[dict[str, Any]]:
    """Every event recorded for notify with this request id, oldest first."""
    with sessions() as session:
        rows = session.scalars(select(NotifyEvents.events).order_by(NotifyEvents.id)).all()
    return [e for events in rows for e in events if e.get("request_id") == request_id]


def job_body(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "a", "type": "noop"}], **fields}


def test_a_created_job_is_answered_on_reply_to_and_announced(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    req = request("create_job", reply_to, body=job_body("from-a-queue", tenant="acme"))
    event = ask(producer, rds, req)
    assert event["event"] == "job.created"
    assert (event["job_name"], event["tenant"], event["state"]) == ("from-a-queue", "acme", "READY")
    with sessions() as session:
        job = session.get(Job, uuid.UUID(event["job_id"]))
        assert job is not None and job.tenant == "acme"
        run = session.get(Run, uuid.UUID(event["run_id"]))
        assert run is not None and run.job_id == job.id
    assert [e["event"] for e in notified(sessions, req["request_id"])] == ["job.created"]
    assert notified(sessions, req["request_id"])[0]["id"] == event["id"]


def test_an_invalid_graph_is_refused_naming_the_task(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    body = {"name": "broken", "tasks": [
        {"name": "a", "type": "noop", "next": ["b"]},
        {"name": "b", "type": "noop", "next": ["nowhere"]},
    ]}
    event = ask(producer, rds, request("create_job", reply_to, body=body))
    assert event["event"] == "request.failed"
    assert "'b'" in event["reason"] and "'nowhere'" in event["reason"], event["reason"]
    assert event["job_id"] is None
    with sessions() as session:
        assert session.scalar(select(func.count()).where(Job.name == "broken")) == 0


@pytest.fixture(scope="module")
def rest(own_settings: Settings) -> Iterator[TestClient]:
    """The REST API on the same servers, to compare its answers with the queue's."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with TestClient(create_app(own_settings), headers=headers) as client:
        yield client


REFUSED_BODIES = {
    "graph": {"name": "g", "tasks": [{"name": "a", "type": "noop", "next": ["gone"]}]},
    "field": {"name": "f", "tasks": [{"name": "x", "type": "no spaces"}]},
    "several": {"tasks": [{"name": "x", "type": "noop", "retries": -1, "timeout": 0}]},
    "nul": {"name": "n", "tasks": [{"name": "x", "type": "noop", "params": {"k": "a\x00"}}]},
    "params": {"name": "p", "params": {"blob": "x" * 70_000},
               "tasks": [{"name": "x", "type": "noop"}]},
    "cron": {"name": "c", "schedule": {"cron": "61 * * * *"},
             "tasks": [{"name": "x", "type": "noop"}]},
    "extra": {"name": "e", "tasks": [{"name": "x", "type": "noop", "colour": "red"}]},
}


def test_an_internal_literal_target_is_refused_as_the_rest_api_refuses_it(
    producer: Celery, rds: redis.Redis, rest: TestClient, reply_to: str
) -> None:
    # The egress policy (issue 14): the cloud metadata address is refused when written.
    body = {"name": "m", "tasks": [{"name": "x", "type": "http", "params": {
        "url": "http://169.254.169.254/latest/meta-data/"}}]}
    expected = rest.post("/api/v1/jobs", json=body)
    assert expected.status_code == 422, expected.text
    event = ask(producer, rds, request("create_job", reply_to, body=body))
    assert event["event"] == "request.failed"
    assert event["reason"] == ("tasks[0].params.url (task 'x'): egress: 169.254.169.254 is a "
                               "cloud metadata address, always refused")


@pytest.mark.parametrize("case", sorted(REFUSED_BODIES))
def test_a_refusal_reads_as_the_rest_api_words_it(
    producer: Celery, rds: redis.Redis, rest: TestClient, reply_to: str, case: str
) -> None:
    body = REFUSED_BODIES[case]
    expected = rest.post("/api/v1/jobs", json=body)
    assert expected.status_code == 422, expected.text
    event = ask(producer, rds, request("create_job", reply_to, body=body))
    assert event["event"] == "request.failed"
    assert event["reason"] == expected.json()["detail"]


def test_a_redelivered_request_creates_one_job_and_one_answer(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    req = request("create_job", reply_to, body=job_body("delivered-twice", draft=True))
    send(producer, req)
    send(producer, req)  # the same message id: a relay or a broker redelivering
    marker = request("delete_job", reply_to, job_id=str(uuid.uuid4()))
    send(producer, marker)  # requests are applied in order: its answer comes last
    answers = [answer(rds, reply_to), answer(rds, reply_to)]
    assert [a["request_id"] for a in answers] == [req["request_id"], marker["request_id"]]
    assert rds.llen(reply_to) == 0
    with sessions() as session:
        assert session.scalar(select(func.count()).where(Job.name == "delivered-twice")) == 1


def test_delete_refuses_an_unfinished_run_unless_forced(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    created = ask(producer, rds, request("create_job", reply_to, body=job_body("to-delete")))
    job_id = created["job_id"]
    refused = ask(producer, rds, request("delete_job", reply_to, job_id=job_id))
    assert refused["event"] == "request.failed" and refused["job_id"] == job_id
    assert f"has an unfinished run {created['run_id']} (READY)" in refused["reason"]
    deleted = ask(producer, rds, request("delete_job", reply_to, job_id=job_id, force=True))
    assert (deleted["event"], deleted["job_id"], deleted["job_name"]) == (
        "job.deleted", job_id, "to-delete")
    with sessions() as session:
        assert session.get(Job, uuid.UUID(job_id)) is None
    again = ask(producer, rds, request("delete_job", reply_to, job_id=job_id))
    assert again["reason"] == f"job {job_id} not found"


def test_a_tenant_request_acts_as_a_bound_token(
    producer: Celery, rds: redis.Redis, reply_to: str
) -> None:
    other = ask(producer, rds, request(
        "create_job", reply_to, body=job_body("globex-job", tenant="globex", draft=True)))
    foreign = ask(producer, rds, request(
        "create_job", reply_to, tenant="acme", body=job_body("j", tenant="globex")))
    assert foreign["reason"] == (
        "the token is bound to tenant 'acme': cannot create a job of tenant 'globex'")
    own = ask(producer, rds, request("create_job", reply_to, tenant="acme", body=job_body("j")))
    assert (own["event"], own["tenant"]) == ("job.created", "acme")
    hidden = ask(producer, rds, request("delete_job", reply_to, tenant="acme",
                                        job_id=other["job_id"]))
    assert hidden["reason"] == f"job {other['job_id']} not found"


def test_an_invalid_request_is_answered_naming_the_field(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    unknown = ask(producer, rds, request("make_coffee", reply_to))
    assert unknown["event"] == "request.failed"
    assert unknown["reason"].startswith("kind: Input tag 'make_coffee' found using 'kind'")
    no_body = ask(producer, rds, request("create_job", reply_to))
    assert no_body["reason"] == "body: Field required"
    own_queue = request("create_job", "stellwerk.activation", body=job_body("never"))
    send(producer, own_queue)
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while not (events := notified(sessions, own_queue["request_id"])):
        assert time.monotonic() < deadline, "the refusal was not announced"
        time.sleep(0.05)
    assert events[0]["reason"].startswith("reply_to: may not name one of Stellwerk's own queues")


def test_subscriptions_are_created_and_deleted(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    job = ask(producer, rds, request("create_job", reply_to, body=job_body("watched", draft=True)))
    body = {"events": ["run.*"], "selector": {"job_id": job["job_id"]},
            "target": {"celery_task": "mine.on_event", "queue": "mine"}}
    created = ask(producer, rds, request("create_subscription", reply_to, body=body))
    assert created["event"] == "subscription.created"
    assert (created["job_id"], created["job_name"]) == (job["job_id"], "watched")
    with sessions() as session:
        assert session.get(Subscription, uuid.UUID(created["subscription_id"])) is not None
    gone = ask(producer, rds, request(
        "delete_subscription", reply_to, subscription_id=created["subscription_id"]))
    assert (gone["event"], gone["subscription_id"]) == (
        "subscription.deleted", created["subscription_id"])
    again = ask(producer, rds, request(
        "delete_subscription", reply_to, subscription_id=created["subscription_id"]))
    assert again["reason"] == f"subscription {created['subscription_id']} not found"
    bad = ask(producer, rds, request("create_subscription", reply_to, body={"events": []}))
    assert bad["reason"].startswith("events: List should have at least 1 item")


def test_deleting_a_job_announces_its_subscriptions_with_the_request(
    producer: Celery, rds: redis.Redis, sessions: sessionmaker[Session], reply_to: str
) -> None:
    job = ask(producer, rds, request("create_job", reply_to, body=job_body("subbed", draft=True)))
    body = {"events": ["*"], "selector": {"job_id": job["job_id"]},
            "target": {"celery_task": "mine.on_event"}}
    sub = ask(producer, rds, request("create_subscription", reply_to, body=body))
    req = request("delete_job", reply_to, job_id=job["job_id"])
    assert ask(producer, rds, req)["event"] == "job.deleted"
    assert rds.llen(reply_to) == 0  # one answer per request
    events = notified(sessions, req["request_id"])
    assert [(e["event"], e["subscription_id"]) for e in events] == [
        ("job.deleted", None), ("subscription.deleted", sub["subscription_id"])]
