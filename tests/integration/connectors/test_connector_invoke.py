"""``POST /invoke`` on a real connector process, and its bound on calls in flight."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from tests.http_stub import HttpStub
from tests.integration.workers.conftest import Dispatcher, ResultInbox, new_dispatch

from .conftest import ConnectorProcess

pytestmark = pytest.mark.integration


def test_an_invocation_without_an_answer_posts_failed_back(
    connector: ConnectorProcess, stub: HttpStub,
) -> None:
    answer = httpx.post(f"{connector.base}/invoke", json={
        "url": "http://127.0.0.1:9/nothing", "timeout": 5,
        "postback_url": stub.url("/status/204/unreachable"),
    }, timeout=10)
    assert answer.status_code == 202, answer.text
    [back] = stub.wait_for("/status/204/unreachable")
    body = back.json()
    assert back.method == "PUT"
    assert body["state"] == "FAILED"
    assert body["message"].startswith(
        "GET http://127.0.0.1:9/nothing: ClientConnectorError: Cannot connect to host")


def test_an_invocation_keeps_the_callers_idempotency_key(
    connector: ConnectorProcess, stub: HttpStub,
) -> None:
    answer = httpx.post(f"{connector.base}/invoke", json={
        "url": stub.url("/status/200/keyed"), "headers": {"idempotency-key": "caller-1"},
        "postback_url": stub.url("/status/204/keyed-back"),
    }, timeout=10)
    assert answer.json()["idempotency_key"] == "caller-1"
    [call] = stub.wait_for("/status/200/keyed")
    assert call.headers["idempotency-key"] == "caller-1"
    assert stub.wait_for("/status/204/keyed-back")[0].json() == {"status": 200}


def test_a_post_back_refused_with_400_is_not_repeated(
    connector: ConnectorProcess, stub: HttpStub,
) -> None:
    httpx.post(f"{connector.base}/invoke", json={
        "url": stub.url("/status/200/once"), "postback_url": stub.url("/status/400/refused"),
    }, timeout=10)
    stub.wait_for("/status/400/refused")
    time.sleep(1.0)  # a retry would come after 0.5 s
    assert len(stub.received("/status/400/refused")) == 1


def test_calls_in_flight_stay_within_the_concurrency(
    connector: ConnectorProcess, stub: HttpStub, dispatcher: Dispatcher, inbox: ResultInbox,
) -> None:
    stub.peak_slow = 0
    # The first 50 calls are held until 50 are in flight at once, then all answer:
    # the connector's --concurrency of 50 is reached, whatever the machine's speed.
    gate = stub.url(f"/gate/50/{uuid.uuid4().hex}")
    dispatches = [new_dispatch("http", params={"url": gate}) for _ in range(120)]
    dispatcher.send_bundled(*dispatches)
    for dispatch in dispatches:
        assert inbox.wait_finished(dispatch, timeout_s=60).outcome == "COMPLETED"
    assert stub.peak_slow == 50  # the connector's --concurrency is 50
