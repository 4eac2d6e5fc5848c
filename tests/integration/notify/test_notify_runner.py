"""The notify runner on real PostgreSQL and Redis, webhooks to a local HTTP receiver."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from kombu import Connection
from standardwebhooks.webhooks import Webhook

from common.messaging.messages import utcnow
from scheduler.notify.backoff import NextStep
from scheduler.notify.deliveries import Attempt, DeliveryStore
from scheduler.notify.main import NotifyRunner
from scheduler.notify.recording import record_deliveries
from scheduler.notify.signing import verify
from scheduler.services.live_events import EVENTS_CHANNEL, STREAM_KEY
from tests.integration.notify.conftest import Log, Notify, event, running
from tests.webhook_receiver import Receiver

SECRET = "integration-secret"


def hook(url: str, app: str, events: list[str] | None = None,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {"events": events or ["run.*"], "selector": {"application": app},
            "target": {"webhook": {"url": url, "secret": SECRET, "headers": headers or {}}}}


def states(log: Log) -> list[tuple[str, str]]:
    return [(d.event, d.state) for d, _ in log]


def finished(count: int) -> Any:
    return lambda log: len(log) == count and all(d.state != "pending" for d, _ in log)


def test_matching_events_are_posted_signed_in_order(notify: Notify, runner: NotifyRunner) -> None:
    app, job, run = uuid.uuid4().hex, uuid.uuid4(), uuid.uuid4()
    with Receiver() as receiver:
        sid = notify.subscribe(hook(receiver.url, app, headers={"X-Team": "ops"}))
        started = event("run.started", job, run, application=app)
        notify.publish(started, event("task.completed", job, run, application=app))
        notify.publish(event("run.started", uuid.uuid4(), application="another-app"))
        completed = event("run.completed", job, run, application=app)
        notify.publish(completed)

        first, second = receiver.wait_for(2)
        log = notify.wait_deliveries(sid, finished(2))

    assert [first.event, second.event] == ["run.started", "run.completed"]
    for request, sent in ((first, started), (second, completed)):
        headers = request.headers
        assert verify(SECRET, headers["x-stellwerk-timestamp"], request.body,
                      headers["x-stellwerk-signature"])
        assert headers["x-stellwerk-signature"].startswith("sha256=")
        assert headers["x-stellwerk-event-id"] == str(sent.id)
        # Standard Webhooks (issue 14): its library verifies the same request.
        standard = Webhook(SECRET.encode()).verify(request.body, dict(headers.items()))
        assert standard == json.loads(request.body)
        assert headers["webhook-id"] == str(sent.id)
        assert headers["x-team"] == "ops"
        assert request.json["id"] == str(sent.id)
        assert request.json["run_id"] == str(run)
    assert states(log) == [("run.started", "delivered"), ("run.completed", "delivered")]
    assert {first.headers["x-stellwerk-delivery"], second.headers["x-stellwerk-delivery"]} == {
        str(d.id) for d, _ in log}
    assert [[a.status_code for a in tries] for _, tries in log] == [[200], [200]]


def test_a_receiver_failing_twice_gets_the_event_on_the_third_try(
    notify: Notify, runner: NotifyRunner,
) -> None:
    app = uuid.uuid4().hex
    with Receiver(statuses=[503, 503]) as receiver:
        sid = notify.subscribe(hook(receiver.url, app))
        notify.publish(event("run.failed", uuid.uuid4(), uuid.uuid4(), application=app))
        tries = receiver.wait_for(3)
        ((delivery, attempts),) = notify.wait_deliveries(sid, finished(1))

    assert len({r.headers["x-stellwerk-delivery"] for r in tries}) == 1
    assert len({r.body for r in tries}) == 1  # the same event each time
    assert delivery.state == "delivered" and delivery.attempts == 3
    assert [(a.number, a.status_code) for a in attempts] == [(1, 503), (2, 503), (3, 200)]
    assert all(a.duration_ms >= 0 for a in attempts)
    assert attempts[0].at < attempts[1].at < attempts[2].at


def test_after_the_last_try_a_delivery_is_dead(notify: Notify, runner: NotifyRunner) -> None:
    app = uuid.uuid4().hex
    with Receiver(default=500) as receiver:
        failing = notify.subscribe(hook(receiver.url, app))
        unreachable = notify.subscribe(hook("http://127.0.0.1:9/nothing-listens", app))
        notify.publish(event("run.timeout", uuid.uuid4(), uuid.uuid4(), application=app))
        ((dead, attempts),) = notify.wait_deliveries(failing, finished(1))
        ((gone, errors),) = notify.wait_deliveries(unreachable, finished(1))

    assert (dead.state, dead.attempts, dead.finished_at is not None) == ("dead", 3, True)
    assert [a.status_code for a in attempts] == [500, 500, 500]
    assert len(receiver.requests) == 3
    assert gone.state == "dead"
    assert [a.status_code for a in errors] == [None, None, None]
    assert all("ConnectError" in a.error for a in errors)


def test_an_event_recorded_twice_makes_no_second_delivery(
    notify: Notify, runner: NotifyRunner,
) -> None:
    app = uuid.uuid4().hex
    with Receiver() as receiver:
        sid = notify.subscribe(hook(receiver.url, app, events=["run.*"]))
        events = notify.publish(event("run.done", uuid.uuid4(), uuid.uuid4(), application=app))
        notify.wait_deliveries(sid, finished(1))
        notify.publish(*events)  # the same event again
        while notify.pending():
            runner.stopping.wait(0.05)
        log = notify.wait_deliveries(sid, finished(1))
        assert len(receiver.requests) == 1
    assert len(log) == 1


def test_a_celery_task_target_gets_the_event_as_its_single_argument(
    notify: Notify, runner: NotifyRunner,
) -> None:
    """Read as the subscriber's Celery worker reads it: kombu, not the product's decoder.

    Decoding with ``open_envelope`` would only prove the product agrees with itself; a
    kombu consumer proves the message is one any Celery client takes.
    """
    app, queue = uuid.uuid4().hex, f"test.events.{uuid.uuid4().hex[:6]}"
    sid = notify.subscribe({"events": ["task.*"], "selector": {"application": app},
                            "target": {"celery_task": "billing.on_event", "queue": queue}})
    job, run, task_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    sent = event("task.failed", job, run, application=app, task="a", task_id=task_id,
                 attempt=2, previous="ACTIVE", state="FAILED", reason="exit code 3")
    notify.publish(sent, event("run.failed", uuid.uuid4(), application=app))
    ((delivery, attempts),) = notify.wait_deliveries(sid, finished(1))

    assert notify.settings.redis_url is not None
    with Connection(notify.settings.redis_url) as conn:
        consumer = conn.SimpleQueue(queue)
        try:
            message = consumer.get(block=True, timeout=10)
            message.ack()
        finally:
            consumer.close()
    assert message.content_type == "application/json"  # what Celery accepts by default
    assert message.headers["task"] == "billing.on_event"
    assert message.headers["id"] == str(delivery.id)
    args, kwargs, _embed = message.payload
    assert kwargs == {}
    (received,) = args
    assert (received["id"], received["event"], received["job_id"], received["run_id"]) == (
        str(sent.id), "task.failed", str(job), str(run))
    assert (received["task"], received["task_id"], received["attempt"]) == (
        "a", str(task_id), 2)
    assert (received["previous"], received["state"], received["reason"]) == (
        "ACTIVE", "FAILED", "exit code 3")
    assert received == sent.model_dump(mode="json")
    assert (delivery.state, [a.error for a in attempts]) == ("delivered", [""])
    assert notify.redis.llen(queue) == 0  # the run.failed event matched no "task.*"


def test_a_run_goes_to_a_subscriber_one_event_at_a_time_other_runs_do_not_wait(
    notify: Notify, runner: NotifyRunner,
) -> None:
    app, slow_run, other_run = uuid.uuid4().hex, uuid.uuid4(), uuid.uuid4()
    with Receiver() as receiver:
        sid = notify.subscribe(hook(receiver.url, app))
        receiver.hold()
        notify.publish(*(event(name, uuid.uuid4(), slow_run, application=app)
                         for name in ("run.started", "run.paused", "run.resumed")))
        receiver.wait_for(1)
        notify.publish(event("run.started", uuid.uuid4(), other_run, application=app))
        second = receiver.wait_for(2)[1]
        assert second.json["run_id"] == str(other_run)  # not held up by the slow run...
        assert len(receiver.requests) == 2  # ...whose next event waits for its first
        receiver.release()
        requests = receiver.wait_for(4)
        notify.wait_deliveries(sid, finished(4))

    slow = [r.event for r in requests if r.json["run_id"] == str(slow_run)]
    assert slow == ["run.started", "run.paused", "run.resumed"]


def test_a_delivery_held_by_a_runner_that_died_is_sent_after_its_lease(
    notify: Notify,
) -> None:
    app = uuid.uuid4().hex
    store = DeliveryStore(notify.sessions)
    with Receiver() as receiver:
        sid = notify.subscribe(hook(receiver.url, app))
        started = event("run.started", uuid.uuid4(), uuid.uuid4(), application=app)
        with notify.sessions.begin() as session:
            record_deliveries(session, [started], utcnow())
        (held,) = store.claim(10, utcnow(), timedelta(seconds=1))  # ...and then it died
        with running(notify.settings):
            (request,) = receiver.wait_for(1, timeout_s=15)
            ((delivery, attempts),) = notify.wait_deliveries(sid, finished(1))
        late = store.finish(held, Attempt(utcnow(), 1.0, 200), NextStep("delivered", None))

    assert request.headers["x-stellwerk-delivery"] == str(held.id)
    assert delivery.state == "delivered" and len(attempts) == 1
    assert late is False  # its claim was taken over: the dead runner's word no longer counts


def test_every_event_reaches_the_live_stream_and_channel(
    notify: Notify, runner: NotifyRunner,
) -> None:
    pubsub = notify.redis.pubsub()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    pubsub.subscribe(EVENTS_CHANNEL)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    job = uuid.uuid4()
    sent = [event(name, job) for name in ("run.started", "task.ready", "run.done")]
    notify.publish(*sent[:2])
    notify.publish(sent[2])
    received: list[str] = []
    while len(received) < 3:
        message = pubsub.get_message(timeout=10)
        assert message is not None, f"only {received} arrived"
        if message["type"] == "message" and json.loads(message["data"])["job_id"] == str(job):
            received.append(json.loads(message["data"])["id"])
    assert received == [str(e.id) for e in sent]
    entries = notify.redis.xrange(STREAM_KEY)
    assert entries is not None
    streamed = []
    for _, fields in entries:
        assert fields is not None  # an entry's fields are nil only once it is trimmed
        streamed.append(json.loads(fields[b"event"])["id"])
    assert streamed[-3:] == received
    assert notify.pending() == 0
    pubsub.close()
