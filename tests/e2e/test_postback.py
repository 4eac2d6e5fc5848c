"""Post-backs, web-service callbacks, detached attempts and worker types, end to end.

A Stellwerk of its own (api, engine, beat; own database and Redis database; a 2 s
lease) and no worker: tasks of types nobody serves wait READY for a post-back, and what
the engine sends to ``tasks.webservice`` stays in Redis to be read, until the last test
starts a connector to run the whole web-service protocol against a local worker stub.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from common.callbacks import CallbackKind, callback_urls
from common.messaging.messages import RESULT_TASK, RESULTS_QUEUE, TaskDispatch, TaskResult
from common.messaging.publisher import Outgoing, Publisher
from common.messaging.wire import open_envelope
from common.persistence.migrate import upgrade
from common.secure_params import SecretBox
from tests.conftest import claim_redis_db, scratch_database
from tests.http_stub import HttpStub, http_stub

from .conftest import (
    ADMIN_TOKEN,
    SECRET_KEY,
    System,
    free_port,
    journal,
    submit,
    tasks_by_name,
    wait_healthy,
    wait_run,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def own_system(
    server_urls: tuple[str, str], tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[System]:
    logs = tmp_path_factory.mktemp("postback-logs")
    redis_url = claim_redis_db(server_urls[1])
    with scratch_database(server_urls[0]) as database_url:
        upgrade(database_url)
        port = free_port()
        env = {
            **os.environ,
            "STELLWERK_DATABASE_URL": database_url, "STELLWERK_REDIS_URL": redis_url,
            "STELLWERK_ADMIN_TOKEN": ADMIN_TOKEN, "STELLWERK_SECRET_KEY": SECRET_KEY,
            "STELLWERK_API_URL": f"http://127.0.0.1:{port}",  # for the callback URLs
            "STELLWERK_DATA_DIR": str(logs / "data"), "STELLWERK_LEASE_TTL_S": "2",
            # The stub web services listen on loopback, refused unless allowed.
            "STELLWERK_EGRESS_ALLOW": "127.0.0.0/8,::1",
            "PYTHONUNBUFFERED": "1",
        }
        system = System(env, logs, port)
        for name in ("api", "engine", "beat"):
            system.start(name, name, *(("--port", str(system.port)) if name == "api" else ()))
        try:
            wait_healthy(system)
            yield system
        finally:
            for name in list(system.procs):
                system.stop(name)
            with contextlib.closing(redis.Redis.from_url(redis_url)) as client:
                client.flushdb()


@pytest.fixture
def api(own_system: System, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    with own_system.client() as client:
        yield client
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(own_system.dump_logs())  # noqa: T201


def wait_for(check: Callable[[], Any], timeout_s: float = 30) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def ready_task(api: httpx.Client, name: str = "a", **task: Any) -> tuple[str, dict[str, Any]]:
    """A run of one task of a type nobody serves, once its task is READY."""
    job = submit(api, {"name": f"pb-{uuid.uuid4().hex[:6]}",
                       "tasks": [{"name": name, "type": "nobody-serves", **task}]})

    def ready() -> dict[str, Any] | None:
        found = tasks_by_name(api.get(f"/runs/{job['run_id']}").json())[name]
        return found if found["state"] == "READY" else None

    return str(job["run_id"]), wait_for(ready)


def put_outcome(api: httpx.Client, run_id: str, body: dict[str, Any]) -> httpx.Response:
    return api.put(f"/runs/{run_id}/tasks/a/outcome", json=body)


@pytest.mark.parametrize(("body", "task_state", "run_state", "output"), [
    ({"state": "COMPLETED", "output": {"rows": 3}}, "COMPLETED", "COMPLETED", {"rows": 3}),
    ({"state": "FAILED", "message": "disk full"}, "FAILED", "FAILED", None),
    ({"status": 409}, "REJECTED", "FAILED", {"status": 409}),
])
def test_a_post_back_ends_a_task_no_worker_serves(
    api: httpx.Client, body: dict[str, Any], task_state: str, run_state: str, output: Any,
) -> None:
    run_id, _ = ready_task(api)
    response = put_outcome(api, run_id, body)
    assert response.status_code == 204, response.text
    run = wait_run(api, run_id, timeout_s=20)
    task = tasks_by_name(run)["a"]
    assert (run["state"], task["state"], task["output"]) == (run_state, task_state, output)
    assert task["message"] == {"FAILED": "disk full", "REJECTED": "reported HTTP status 409"
                               }.get(task_state, "")


def test_late_and_repeated_post_backs(api: httpx.Client) -> None:
    run_id, task = ready_task(api)
    stale = put_outcome(api, run_id, {"state": "COMPLETED", "attempt": 2})
    assert stale.status_code == 409
    assert "attempt 2 of task 'a' is not current" in stale.json()["detail"]
    done = {"state": "COMPLETED", "output": {"ok": True}, "attempt": task["attempt"]}
    assert put_outcome(api, run_id, done).status_code == 204
    assert put_outcome(api, run_id, done).status_code == 204  # identical: answered alike
    other = put_outcome(api, run_id, {"state": "FAILED", "attempt": task["attempt"]})
    assert other.status_code == 409
    assert "COMPLETED" in other.json()["detail"]
    run = wait_run(api, run_id, timeout_s=20)
    assert (run["state"], tasks_by_name(run)["a"]["output"]) == ("COMPLETED", {"ok": True})
    assert [e["to"] for e in journal(api, run_id) if e["task"] == "a"].count("COMPLETED") == 1


def urls(system: System, run_id: str, task: dict[str, Any]) -> dict[CallbackKind, str]:
    """The callback URLs the connector would hand a web-service worker."""
    return dict(callback_urls(system.base, SECRET_KEY, uuid.UUID(run_id),
                              uuid.UUID(task["id"]), task["attempt"]))


def test_callbacks_with_their_token_log_store_and_complete(
    own_system: System, api: httpx.Client,
) -> None:
    run_id, task = ready_task(api, timeout=60)
    callbacks = urls(own_system, run_id, task)
    plain = httpx.post(callbacks["log"], content="rendering\nframe 1 of 2\n",
                       headers={"Content-Type": "text/plain"})
    assert plain.status_code == 204, plain.text
    assert httpx.post(callbacks["storage"], json={"frame": 2}).status_code == 204
    done = {"state": "COMPLETED", "message": "rendered", "output": {"frames": 2}}
    assert httpx.post(callbacks["status"], json=done).status_code == 204
    assert httpx.post(callbacks["status"], json=done).status_code == 204  # identical repeat

    run = wait_run(api, run_id, timeout_s=20)
    finished = tasks_by_name(run)["a"]
    assert (run["state"], finished["output"], finished["message"]) == (
        "COMPLETED", {"frames": 2}, "rendered")
    lines = api.get(f"/runs/{run_id}/tasks/a/logs").json()["lines"]
    assert [line["line"] for line in lines] == ["rendering", "frame 1 of 2"]
    job_id = api.get(f"/runs/{run_id}").json()["job_id"]
    assert api.get(f"/jobs/{job_id}").json()["storage"] == {"frame": 2}
    assert httpx.post(callbacks["log"], content="late").status_code == 409


def test_callbacks_with_a_wrong_token_are_refused_and_change_nothing(
    own_system: System, api: httpx.Client,
) -> None:
    run_id, task = ready_task(api)
    forged = {kind: url.replace("token=", "token=0") for kind, url in
              urls(own_system, run_id, task).items()}
    assert httpx.post(forged["log"], content="x").status_code == 403
    assert httpx.post(forged["storage"], json={"x": 1}).status_code == 403
    assert httpx.post(forged["status"], json={"state": "COMPLETED"}).status_code == 403
    # Callbacks are applied within their request: nothing can show up later.
    run = api.get(f"/runs/{run_id}").json()
    assert (run["state"], tasks_by_name(run)["a"]["state"]) == ("ACTIVE", "READY")
    assert api.get(f"/runs/{run_id}/tasks/a/logs").json()["lines"] == []
    assert api.get(f"/jobs/{run['job_id']}").json()["storage"] == {}


def test_a_detached_attempt_without_callbacks_times_out_and_is_never_requeued(
    own_system: System, api: httpx.Client,
) -> None:
    """A connector's 201 makes the attempt detached: its 2 s lease no longer applies."""
    run_id, task = ready_task(api, timeout=4)
    started = TaskResult(task_run_id=uuid.UUID(task["id"]), run_id=uuid.UUID(run_id),
                         attempt=task["attempt"], kind="started", worker="connector@e2e",
                         detached=True)
    sent_at = time.monotonic()
    with contextlib.closing(redis.Redis.from_url(own_system.env["STELLWERK_REDIS_URL"])) as r:
        Publisher(r).publish([Outgoing(RESULTS_QUEUE, RESULT_TASK,
                                       started.model_dump(mode="json"), str(started.message_id))])
    run = wait_run(api, run_id, timeout_s=30)
    assert time.monotonic() - sent_at >= 3.5  # its timeout, not its 2 s lease
    timed_out = tasks_by_name(run)["a"]
    assert (run["state"], timed_out["state"], timed_out["attempt"]) == (
        "TIMEOUT", "TIMEOUT", task["attempt"])
    changes = [(e["from"], e["to"], e["reason"]) for e in journal(api, run_id) if e["task"] == "a"]
    assert ("ACTIVE", "TIMEOUT", "timeout") in changes
    assert not any("lease expired" in reason for _, _, reason in changes)


def test_worker_types_are_registered_and_their_tasks_dispatched_to_the_webservice_queue(
    own_system: System, api: httpx.Client,
) -> None:
    name = f"render-{uuid.uuid4().hex[:6]}"
    created = api.post("/worker-types", json={
        "name": name, "url": "https://render.example/jobs",
        "headers": {"Authorization": "Bearer type-secret", "X-Pool": "gpu"},
        "job_template": {"params": {"quality": "high"}, "timeout": 600},
    })
    assert created.status_code == 201, created.text
    assert created.json()["headers"] == ["Authorization", "X-Pool"]
    for response in (api.get("/worker-types"), api.get(f"/worker-types/{name}")):
        assert response.status_code == 200
        assert "type-secret" not in response.text
    job = submit(api, {"name": "bound-e2e", "webservice": {"headers": {"X-Pool": "cpu"}},
                       "tasks": [{"name": "render", "type": name, "params": {"scene": 7}}]})

    dispatch = wait_for(lambda: _queued_dispatch(own_system, job["run_id"]))
    assert (dispatch.type, dispatch.task, dispatch.timeout_s) == ("webservice", "render", 600)
    assert dispatch.params == {"quality": "high", "url": "https://render.example/jobs",
                               "scene": 7}
    assert dispatch.sealed_secure_params is not None
    assert SecretBox(SECRET_KEY).open(dispatch.sealed_secure_params) == {
        "headers": {"Authorization": "Bearer type-secret", "X-Pool": "cpu"}}
    run = api.get(f"/runs/{job['run_id']}").json()
    assert [(t["type"], t["state"]) for t in run["tasks"]] == [(name, "READY")]

    in_use = api.delete(f"/worker-types/{name}")
    assert in_use.status_code == 409
    assert api.delete(f"/jobs/{job['id']}", params={"force": True}).status_code == 204
    assert api.delete(f"/worker-types/{name}").status_code == 204
    assert api.get(f"/worker-types/{name}").status_code == 404


def _queued_dispatch(system: System, run_id: str) -> TaskDispatch | None:
    with contextlib.closing(redis.Redis.from_url(system.env["STELLWERK_REDIS_URL"])) as r:
        raw = r.lrange("tasks.webservice", 0, -1)
    for item in raw:
        received = open_envelope(item)
        if received.task_name == "stellwerk.execute" and received.payload["run_id"] == run_id:
            return TaskDispatch.model_validate(received.payload)
    return None


@pytest.fixture
def connector(own_system: System) -> Iterator[None]:
    """A connector serving ``http`` and ``webservice`` (for the last test only)."""
    port = free_port()
    own_system.start("connector", "connector", "--port", str(port))
    wait_for(lambda: _healthy(f"http://127.0.0.1:{port}/healthz"), timeout_s=60)
    yield
    own_system.stop("connector")


def _healthy(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=2).status_code == 200
    return False


@pytest.fixture
def stub() -> Iterator[HttpStub]:
    yield from http_stub()


def test_a_web_service_worker_gets_the_configured_headers_and_completes_by_callbacks(
    api: httpx.Client, connector: None, stub: HttpStub,
) -> None:
    """The web-service protocol with the real connector: 201, then log, storage and status."""
    name = f"ws-{uuid.uuid4().hex[:6]}"
    assert api.post("/worker-types", json={
        "name": name, "url": stub.url("/status/201/worker"),
        "headers": {"Authorization": "Bearer type-secret", "X-Pool": "gpu"},
    }).status_code == 201
    job = submit(api, {"name": "ws-e2e", "webservice": {"headers": {"X-Pool": "cpu"}},
                       "tasks": [{"name": "render", "type": name, "timeout": 60,
                                  "params": {"scene": 7}}]})
    (request,) = stub.wait_for("/status/201/worker", timeout_s=60)
    assert (request.headers["authorization"], request.headers["x-pool"]) == (
        "Bearer type-secret", "cpu")
    body = request.json()
    assert body["params"] == {"scene": 7}
    wait_for(lambda: tasks_by_name(api.get(f"/runs/{job['run_id']}").json())["render"]["state"]
             == "ACTIVE")
    callbacks = body["callbacks"]  # what the worker does, later, on its own
    assert httpx.post(callbacks["log"], content="frame 1").status_code == 204
    assert httpx.post(callbacks["storage"], json={"scene": 7, "done": True}).status_code == 204
    status = {"state": "COMPLETED", "message": "rendered", "output": {"frames": 1}}
    assert httpx.post(callbacks["status"], json=status).status_code == 204

    run = wait_run(api, job["run_id"], timeout_s=30)
    task = tasks_by_name(run)["render"]
    assert (run["state"], task["type"], task["output"]) == ("COMPLETED", name, {"frames": 1})
    lines = api.get(f"/runs/{job['run_id']}/tasks/render/logs").json()["lines"]
    assert [line["line"] for line in lines][-1] == "frame 1"  # after the connector's own
    assert api.get(f"/jobs/{job['id']}").json()["storage"] == {"scene": 7, "done": True}


def test_a_web_service_worker_that_never_calls_back_ends_timeout(
    api: httpx.Client, connector: None, stub: HttpStub,
) -> None:
    job = submit(api, {"name": "ws-silent", "tasks": [{
        "name": "render", "type": "webservice", "timeout": 3,
        "params": {"url": stub.url("/status/201/silent")}}]})
    stub.wait_for("/status/201/silent", timeout_s=60)
    run = wait_run(api, job["run_id"], timeout_s=30)
    task = tasks_by_name(run)["render"]
    assert (run["state"], task["state"], task["attempt"]) == ("TIMEOUT", "TIMEOUT", 1)
