"""``stellwerk connector`` end to end: http tasks, 500 slow calls, /invoke, a webservice.

The session's system gets a connector process for this module (``stellwerk connector``
as a user starts it); a local HTTP stub stands in for the endpoints it calls.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit
from uuid import UUID, uuid4

import httpx
import pytest

from common.callbacks import verify_callback_token
from tests.http_stub import HttpStub, http_stub

from .conftest import SECRET_KEY, System, free_port, submit, tasks_by_name, wait_run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def connector(system: System) -> Iterator[str]:
    """The connector's own base URL (``/invoke``, ``/healthz``)."""
    port = free_port()
    system.start("connector", "connector", "--port", str(port), "--concurrency", "500")
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                break
        assert time.monotonic() < deadline, "connector not healthy\n" + system.dump_logs()
        time.sleep(0.1)
    yield base
    system.stop("connector")


@pytest.fixture(scope="module")
def stub() -> Iterator[HttpStub]:
    yield from http_stub()


def keyed(stub: HttpStub, prefix: str) -> dict[str, list[str]]:
    """Idempotency keys of the requests to ``prefix``, by key (a list, to see repeats)."""
    found: dict[str, list[str]] = {}
    for request in stub.received(prefix):
        key = request.headers.get("idempotency-key", "")
        found.setdefault(key, []).append(request.path)
    return found


def test_http_tasks_end_as_their_status_says(
    api: httpx.Client, connector: str, stub: HttpStub,
) -> None:
    job = submit(api, {
        "name": "http-statuses", "failure_threshold": 1.0,
        "tasks": [
            {"name": "ok", "type": "http",
             "params": {"url": stub.url("/status/200"), "method": "POST",
                        "json": {"hello": "world"}}},
            {"name": "conflict", "type": "http", "params": {"url": stub.url("/status/409")}},
            {"name": "boom", "type": "http", "params": {"url": stub.url("/status/500")}},
        ],
    })
    run = wait_run(api, job["run_id"])
    tasks = tasks_by_name(run)

    assert {name: t["state"] for name, t in tasks.items()} == {
        "ok": "COMPLETED", "conflict": "REJECTED", "boom": "FAILED"}
    assert tasks["ok"]["output"]["status"] == 200
    assert tasks["ok"]["output"]["json"] == {"answered": 200}
    assert "answered HTTP 409" in tasks["conflict"]["message"]
    assert "answered HTTP 500" in tasks["boom"]["message"]
    for name, prefix in (("ok", "/status/200"), ("conflict", "/status/409"),
                         ("boom", "/status/500")):
        key = f"{tasks[name]['id']}:{tasks[name]['attempt']}"
        assert len(keyed(stub, prefix).get(key, [])) == 1, (name, keyed(stub, prefix))
    assert all(r.headers.get("idempotency-key") for r in stub.received("/status/"))


def test_500_calls_are_in_flight_together_on_one_connector(
    api: httpx.Client, connector: str, stub: HttpStub,
) -> None:
    """500 calls are in flight together, not queued behind a few slots.

    The calls go to a gate of the stub that holds each until half of them are held at
    once, then lets every call through: with ``--concurrency 500`` that half is reached
    however slowly a loaded machine dispatches them; a connector of a few dozen slots
    never reaches it and its calls end by their timeout. How fast the run finishes is
    a figure for bench/, not asserted here (a loaded 2-core machine took 5-13 s).
    """
    count = 500
    stub.peak_slow = 0  # no slow call is in flight: earlier tests call other routes
    gate = f"/gate/{count // 2}/{uuid4().hex}"
    job = submit(api, {
        "name": "http-fan-out",
        "tasks": [{"name": f"call-{i:03d}", "type": "http",
                   "params": {"url": stub.url(gate)}} for i in range(count)],
    })
    with contextlib.suppress(AssertionError):  # too few came: the run's state says why
        stub.wait_for(gate, count=count, timeout_s=60)  # no polling while they come
    run = wait_run(api, job["run_id"], timeout_s=120)

    failures = {t["name"]: t["message"] for t in run["tasks"] if t["state"] == "FAILED"}
    assert run["state"] == "COMPLETED", (run["progress"], failures)
    keys = keyed(stub, gate)
    assert {f"{t['id']}:{t['attempt']}" for t in run["tasks"]} <= set(keys)
    assert stub.peak_slow >= count // 2, f"only {stub.peak_slow} of {count} calls at once"


def test_invoke_posts_the_outcome_back(connector: str, stub: HttpStub) -> None:
    answer = httpx.post(f"{connector}/invoke", json={
        "method": "PUT", "url": stub.url("/status/409/invoke"), "json": {"x": 1},
        "postback_url": stub.url("/flaky/1/invoke-409"),
        "postback_headers": {"Authorization": "Bearer postback-token"},
    }, timeout=10)
    assert answer.status_code == 202, answer.text
    invocation = answer.json()

    call = stub.wait_for("/status/409/invoke")[0]
    assert call.headers["idempotency-key"] == invocation["idempotency_key"] == invocation["id"]
    assert call.method == "PUT" and call.json() == {"x": 1}
    backs = stub.wait_for("/flaky/1/invoke-409", count=2)  # 503 first, then taken
    assert [r.json() for r in backs] == [{"status": 409}, {"status": 409}]
    assert backs[-1].method == "PUT"
    assert backs[-1].headers["authorization"] == "Bearer postback-token"


def test_invoke_refuses_a_bad_body_naming_the_field(connector: str) -> None:
    answer = httpx.post(f"{connector}/invoke", json={
        "url": "not a url", "timeout": 0, "postback_headers": {"Authorization": "Bearer hidden"},
    }, timeout=10)
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    for field in ("url", "timeout", "postback_url"):
        assert field in detail
    assert "hidden" not in answer.text


def test_a_webservice_worker_gets_the_attempt_and_signed_callbacks(
    api: httpx.Client, connector: str, stub: HttpStub,
) -> None:
    job = submit(api, {
        "name": "webservice-handoff", "params": {"region": "eu"},
        "tasks": [{"name": "render", "type": "webservice",
                   "params": {"url": stub.url("/status/201/render"), "headers": {"X-Team": "vfx"},
                              "frames": 24}}],
    })
    request = stub.wait_for("/status/201/render", timeout_s=60)[0]
    body = request.json()
    try:
        run = api.get(f"/runs/{job['run_id']}").json()
        task = tasks_by_name(run)["render"]
        assert body["run_id"] == job["run_id"]
        assert body["task_id"] == task["id"]
        assert body["task_name"] == "render"
        assert body["idempotency_key"] == f"{task['id']}:{body['attempt']}"
        assert request.headers["idempotency-key"] == body["idempotency_key"]
        assert request.headers["x-team"] == "vfx"
        assert body["job"] == {"id": job["id"], "name": "webservice-handoff",
                               "tenant": job.get("tenant", ""), "params": {"region": "eu"}}
        assert body["params"] == {"frames": 24}
        assert body["storage"] == {}
        assert set(body["callbacks"]) == {"log", "storage", "status"}
        api_base = str(api.base_url).rstrip("/")
        for kind, url in body["callbacks"].items():
            parts = urlsplit(url)
            assert url.startswith(f"{api_base}/runs/{job['run_id']}/tasks/{task['id']}/")
            assert parts.path.endswith(f"/callbacks/{kind}")
            query = parse_qs(parts.query)
            assert query["attempt"] == [str(body["attempt"])]
            assert verify_callback_token(
                SECRET_KEY, UUID(task["id"]), body["attempt"], query["token"][0]
            )
    finally:
        api.post(f"/runs/{job['run_id']}/cancel")
