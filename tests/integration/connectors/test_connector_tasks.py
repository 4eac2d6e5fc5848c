"""The connector process on real Redis: claims, results, heartbeats, cancel, timeout.

Dispatches are published as the engine's relay publishes them; results are read from
``stellwerk.results`` with a plain kombu consumer; a local HTTP stub is the outside.
"""

from __future__ import annotations

import time

import pytest
import redis

from common.callbacks import verify_callback_token
from common.messaging.keys import cancel_key, claim_key
from common.messaging.liveness import live_workers
from common.messaging.messages import EXECUTE_TASK, task_queue
from common.messaging.publisher import Outgoing, Publisher
from common.secure_params import SecretBox
from tests.http_stub import HttpStub
from tests.integration.workers.conftest import Dispatcher, ResultInbox, new_dispatch

from .conftest import CALLBACK_BASE, SECRET_KEY, ConnectorProcess

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("connector")]


def http(url: str, **params: object) -> dict[str, object]:
    return {"url": url, **params}


def wait_settled(client: redis.Redis, timeout_s: float = 30.0) -> None:
    """Return once every delivery of ``tasks.http`` has been taken and settled.

    kombu keeps a message it has handed out in the ``unacked`` hash until the connector
    acknowledges it, which it does once it has claimed (or found claimed) its attempts.
    """
    deadline = time.monotonic() + timeout_s
    while client.llen(task_queue("http")) or client.hlen("unacked"):
        assert time.monotonic() < deadline, "a delivery of tasks.http was never settled"
        time.sleep(0.02)


def test_a_call_completes_with_the_response_and_the_attempts_key(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    dispatch = new_dispatch("http", params=http(
        stub.url("/status/200"), method="post", json={"a": 1}, headers={"X-Plain": "p"}
    ), sealed_secure_params=SecretBox(SECRET_KEY).seal(
        {"headers": {"Authorization": "Bearer s3cr3t-value"}}
    ))
    dispatcher.send(dispatch)

    result = inbox.wait_finished(dispatch)
    assert result.outcome == "COMPLETED", result.message
    assert result.output == {
        "status": 200, "headers": {"content-type": "application/json", "etag": '"v1"'},
        "json": {"answered": 200},
    }
    assert result.worker == "itest-connector@localhost"
    assert [r.kind for r in inbox.for_attempt(dispatch)] == ["finished"]  # short: no started
    request = [r for r in stub.received("/status/200")
               if r.headers.get("idempotency-key") == dispatch.idempotency_key]
    assert len(request) == 1
    assert request[0].method == "POST"
    assert request[0].json() == {"a": 1}
    assert request[0].headers["authorization"] == "Bearer s3cr3t-value"
    assert request[0].headers["x-plain"] == "p"
    assert "s3cr3t" not in result.model_dump_json()


@pytest.mark.parametrize(("status", "outcome"), [(409, "REJECTED"), (401, "REJECTED"),
                                                 (500, "FAILED"), (404, "FAILED")])
def test_statuses_map_to_outcomes(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox, status: int, outcome: str,
) -> None:
    dispatch = new_dispatch("http", params=http(stub.url(f"/status/{status}")))
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == outcome
    assert f"answered HTTP {status}" in result.message
    assert result.output is not None and result.output["status"] == status


def test_no_connection_fails_the_task(dispatcher: Dispatcher, inbox: ResultInbox) -> None:
    dispatch = new_dispatch("http", params=http("http://127.0.0.1:9/nothing-listens"))
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "FAILED"
    assert "ClientConnectorError: Cannot connect to host 127.0.0.1:9" in result.message


def test_bad_params_reject_the_task_naming_the_param(
    dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    dispatch = new_dispatch("http", params={"url": "ftp://x", "methd": "GET", "timeout": -1})
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "REJECTED"
    for param in ("params.url", "params.methd", "params.timeout"):
        assert param in result.message


def test_a_slow_call_reports_started_then_heartbeats(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    dispatch = new_dispatch("http", params=http(stub.url("/slow/1.2")))
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "COMPLETED"
    kinds = [r.kind for r in inbox.for_attempt(dispatch)]
    assert kinds[0] == "started" and kinds[-1] == "finished"
    assert kinds.count("heartbeat") >= 2  # every 0.3 s over ~1 s
    assert "HTTP 200" in result.logs[0].line


def test_a_cancel_aborts_the_call(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox, connector_redis: redis.Redis,
) -> None:
    dispatch = new_dispatch("http", params=http(stub.url("/slow/30")))
    dispatcher.send(dispatch)
    inbox.wait_for(lambda r: r.kind == "started" and r in inbox.for_attempt(dispatch), 30)
    began = time.monotonic()
    connector_redis.set(cancel_key(dispatch.idempotency_key), "1", ex=60)

    result = inbox.wait_finished(dispatch, timeout_s=20)
    assert time.monotonic() - began < 20  # generous: the call it aborts would take 30 s
    assert result.outcome == "FAILED"
    assert "canceled" in result.message


def test_the_task_timeout_ends_the_call_as_timeout(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    dispatch = new_dispatch("http", params=http(stub.url("/slow/30")), timeout_s=0.5)
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch, timeout_s=10)
    assert result.outcome == "TIMEOUT"
    assert "timed out after 0.5 s" in result.message


def test_an_attempt_delivered_twice_runs_once(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox, connector_redis: redis.Redis,
) -> None:
    dispatch = new_dispatch("http", params=http(stub.url("/status/201")))
    dispatcher.send(dispatch)
    dispatcher.send(dispatch)
    inbox.wait_finished(dispatch)
    wait_settled(connector_redis)  # the second delivery has been taken and skipped
    inbox.drain()
    assert [r.kind for r in inbox.for_attempt(dispatch)] == ["finished"]
    keyed = [r for r in stub.received("/status/201")
             if r.headers.get("idempotency-key") == dispatch.idempotency_key]
    assert len(keyed) == 1
    assert connector_redis.get(claim_key(dispatch.idempotency_key)) == b"itest-connector@localhost"


def test_a_bundle_runs_every_attempt_once(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    dispatches = [new_dispatch("http", params=http(stub.url("/slow/0.3"))) for _ in range(40)]
    dispatcher.send_bundled(*dispatches)
    for dispatch in dispatches:
        assert inbox.wait_finished(dispatch).outcome == "COMPLETED"
    keys = [r.headers["idempotency-key"] for r in stub.received("/slow/0.3")]
    assert sorted(keys) == sorted(d.idempotency_key for d in dispatches)


def test_a_malformed_dispatch_is_rejected(connector_redis: redis.Redis, inbox: ResultInbox) -> None:
    dispatch = new_dispatch("http", params=http("http://127.0.0.1:9/"))
    payload = dispatch.model_dump(mode="json")
    del payload["job_id"]
    Publisher(connector_redis).publish([Outgoing(task_queue("http"), EXECUTE_TASK, payload)])
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "REJECTED"
    assert "job_id" in result.message


def test_a_webservice_that_answers_201_takes_the_task_over(
    stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    dispatch = new_dispatch("webservice", params={
        "url": stub.url("/status/201"), "headers": {"X-Type": "render"}, "frames": 12,
    }, job_params={"scene": "a"}, storage={"last": 3})
    dispatcher.send(dispatch)

    started = inbox.wait_for(lambda r: r in inbox.for_attempt(dispatch), 30)
    assert started.kind == "started" and started.detached
    request = next(r for r in stub.wait_for("/status/201")
                   if r.headers.get("idempotency-key") == dispatch.idempotency_key)
    body = request.json()
    assert request.headers["x-type"] == "render"
    assert body["params"] == {"frames": 12}
    assert body["job"] == {"id": str(dispatch.job_id), "name": "itest", "tenant": "acme",
                           "params": {"scene": "a"}}
    assert body["storage"] == {"last": 3}
    assert set(body["callbacks"]) == {"log", "storage", "status"}
    for url in body["callbacks"].values():
        prefix = f"{CALLBACK_BASE}/runs/{dispatch.run_id}/tasks/{dispatch.task_run_id}/"
        assert url.startswith(prefix)
        token = url.rsplit("token=", 1)[1]
        assert verify_callback_token(SECRET_KEY, dispatch.task_run_id, dispatch.attempt, token)
    time.sleep(0.5)
    inbox.drain()
    assert [r.kind for r in inbox.for_attempt(dispatch)] == ["started"]  # nothing more


def test_the_connector_keeps_a_liveness_record(
    connector: ConnectorProcess, connector_redis: redis.Redis,
) -> None:
    records = {r["hostname"]: r for r in live_workers(connector_redis)}
    assert records[connector.hostname]["types"] == ["http", "webservice"]
    assert records[connector.hostname]["concurrency"] == 50
