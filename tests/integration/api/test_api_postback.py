"""Post-backs and web-service callbacks over REST, applied in the API's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from common.callbacks import callback_token
from common.config import Settings
from common.messaging.keys import cancel_key
from common.messaging.messages import TaskResult
from common.persistence.models import TaskRun
from scheduler.api.app import create_app
from scheduler.engine.batch import BatchApplier
from scheduler.engine.incoming import Incoming
from tests.integration.api.conftest import auth_headers, start_run

BASE = "/api/v1"


def one_task_run(client: TestClient, engine: BatchApplier, **task: Any) -> dict[str, Any]:
    """A started run of one task of a type no worker serves; its task is READY."""
    body = {"name": f"postback-{uuid.uuid4().hex[:8]}",
            "tasks": [{"name": "a", "type": "nobody-serves", **task}]}
    job = client.post(f"{BASE}/jobs", json=body).json()
    start_run(engine, job["run_id"])
    run = client.get(f"{BASE}/runs/{job['run_id']}").json()
    return {"job": job["id"], "run": run["id"], "task": run["tasks"][0]}


def outcome(client: TestClient, run: dict[str, Any], body: Any, **kwargs: Any) -> Any:
    return client.put(f"{BASE}/runs/{run['run']}/tasks/a/outcome", json=body, **kwargs)


def task_of(client: TestClient, run: dict[str, Any]) -> dict[str, Any]:
    return dict(client.get(f"{BASE}/runs/{run['run']}").json()["tasks"][0])


@pytest.mark.parametrize("body", [
    {}, {"state": "COMPLETED", "status": 200}, {"status": 204, "output": {}},
    {"status": 99}, {"state": "TIMEOUT"}, {"state": "COMPLETED", "attempt": -1},
])
def test_a_body_of_neither_or_both_forms_is_422(client: TestClient, body: Any) -> None:
    response = client.put(f"{BASE}/runs/{uuid.uuid4()}/tasks/a/outcome", json=body)
    assert response.status_code == 422, response.text


def test_unknown_runs_and_unready_tasks_are_refused(
    client: TestClient, engine: BatchApplier,
) -> None:
    missing = client.put(f"{BASE}/runs/{uuid.uuid4()}/tasks/a/outcome",
                         json={"state": "COMPLETED"})
    assert missing.status_code == 404
    run = one_task_run(client, engine)
    assert outcome(client, run, {"state": "COMPLETED"}).status_code == 204
    body = {"name": f"waiting-{uuid.uuid4().hex[:8]}",
            "tasks": [{"name": "a", "type": "nobody-serves"}]}
    unstarted = client.post(f"{BASE}/jobs", json=body).json()
    waiting = outcome(client, {"run": unstarted["run_id"]}, {"state": "COMPLETED"})
    assert waiting.status_code == 409
    assert waiting.json()["detail"].startswith("task 'a' is WAITING")
    nope = client.put(f"{BASE}/runs/{run['run']}/tasks/nope/outcome", json={"status": 200})
    assert nope.status_code == 404


def test_a_post_back_completes_a_ready_task_once_and_repeats_are_answered_alike(
    client: TestClient, engine: BatchApplier, api_settings: Settings,
) -> None:
    run = one_task_run(client, engine)
    body = {"state": "COMPLETED", "output": {"rows": 3}, "message": "done", "attempt": 1}
    assert outcome(client, run, body).status_code == 204
    task = task_of(client, run)
    assert (task["state"], task["output"], task["message"], task["worker"]) == (
        "COMPLETED", {"rows": 3}, "done", "admin")
    assert client.get(f"{BASE}/runs/{run['run']}").json()["state"] == "COMPLETED"
    journal = client.get(f"{BASE}/runs/{run['run']}/journal").json()["entries"]
    assert {e["actor"] for e in journal if e["task"] == "a" and e["to"] == "COMPLETED"} == {
        "admin"}
    # A worker that would take the attempt from its queue now skips it.
    with redis.Redis.from_url(api_settings.require_urls()[1]) as client_redis:
        assert client_redis.exists(cancel_key(f"{task['id']}:1"))

    assert outcome(client, run, body).status_code == 204  # identical: as the first
    assert outcome(client, run, {k: v for k, v in body.items() if k != "attempt"}
                   ).status_code == 204
    other = outcome(client, run, {**body, "output": {"rows": 4}})
    assert other.status_code == 409
    assert other.json()["detail"].startswith("task 'a' is COMPLETED")
    stale = outcome(client, run, {**body, "attempt": 2})
    assert stale.status_code == 409
    assert "attempt 2 of task 'a' is not current" in stale.json()["detail"]
    assert task_of(client, run) == task


def test_the_status_form_maps_the_http_status_and_job_task_tokens_may_post_back(
    client: TestClient, engine: BatchApplier,
) -> None:
    minted = client.post(f"{BASE}/tokens", json={"name": f"pb-{uuid.uuid4().hex[:6]}",
                                                   "scopes": ["job.task"]}).json()
    task_token = {"Authorization": f"Bearer {minted['token']}"}
    run = one_task_run(client, engine)
    assert outcome(client, run, {"status": 409}, headers=task_token).status_code == 204
    task = task_of(client, run)
    assert (task["state"], task["output"], task["message"]) == (
        "REJECTED", {"status": 409}, "reported HTTP status 409")
    read_only = client.post(f"{BASE}/tokens", json={"name": f"ro-{uuid.uuid4().hex[:6]}",
                                                      "scopes": ["job.read"]}).json()
    refused = outcome(client, one_task_run(client, engine), {"status": 200},
                      headers={"Authorization": f"Bearer {read_only['token']}"})
    assert refused.status_code == 403


# -- callbacks: no bearer token, the signed URL is the credential

def callback(client: TestClient, run: dict[str, Any], kind: str, *, token: str | None = None,
             attempt: int = 1, **kwargs: Any) -> Any:
    task_id = run["task"]["id"]
    token = token or callback_token("test-secret-key", uuid.UUID(task_id), attempt)
    return client.post(f"{BASE}/runs/{run['run']}/tasks/{task_id}/callbacks/{kind}",
                       params={"attempt": attempt, "token": token}, **kwargs)


def logs(client: TestClient, run: dict[str, Any]) -> list[str]:
    body = client.get(f"{BASE}/runs/{run['run']}/tasks/a/logs").json()
    return [line["line"] for line in body["lines"]]


def test_callbacks_log_store_and_finish_a_detached_attempt(
    client: TestClient, anonymous: TestClient, engine: BatchApplier,
    sessions: sessionmaker[Session],
) -> None:
    """No bearer token (``anonymous``): the signed URL is the credential."""
    run = one_task_run(client, engine, timeout=300)
    text = callback(anonymous, run, "log", content="first\nsecond\n",
                    headers={"Content-Type": "text/plain"})
    assert text.status_code == 204, text.text
    with sessions() as session:
        row = session.get(TaskRun, uuid.UUID(run["task"]["id"]))
        assert row is not None
        assert (row.state, row.detached, row.lease_expires_at) == ("ACTIVE", True, None)
        assert row.deadline_at is not None
    assert callback(anonymous, run, "log", json=["third", {"line": "fourth"}]).status_code == 204
    assert callback(anonymous, run, "log", json={"line": "x" * 9000}).status_code == 204
    stored = callback(anonymous, run, "storage", json={"cursor": 42})
    assert stored.status_code == 204
    done = {"state": "COMPLETED", "message": "ok", "output": {"frames": 2}}
    assert callback(anonymous, run, "status", json=done).status_code == 204
    assert callback(anonymous, run, "status", json=done).status_code == 204  # identical repeat

    lines = logs(client, run)
    assert lines[:4] == ["first", "second", "third", "fourth"]
    assert lines[4].endswith("[stellwerk: 808 more characters truncated]")
    assert client.get(f"{BASE}/jobs/{run['job']}").json()["storage"] == {"cursor": 42}
    task = task_of(client, run)
    assert (task["state"], task["output"], task["message"]) == ("COMPLETED", {"frames": 2}, "ok")
    late = callback(anonymous, run, "log", content="late", headers={"Content-Type": "text/plain"})
    assert late.status_code == 409
    assert callback(anonymous, run, "status", json={**done, "message": "again"}).status_code == 409


def test_a_callback_without_its_credential_is_refused_and_changes_nothing(
    client: TestClient, anonymous: TestClient, engine: BatchApplier,
) -> None:
    run = one_task_run(client, engine)
    forged = callback(anonymous, run, "status", token="0" * 64, json={"state": "COMPLETED"})
    assert forged.status_code == 403
    assert "not the callback credential" in forged.json()["detail"]
    odd = callback(anonymous, run, "log", token="tökén\u2603", content="x")
    assert odd.status_code == 403  # not a 500: any text may come in the query
    other_attempt = callback(anonymous, run, "log", token=callback_token(
        "test-secret-key", uuid.UUID(run["task"]["id"]), 2), content="x")
    assert other_attempt.status_code == 403
    task_id = run["task"]["id"]
    unsigned = anonymous.post(f"{BASE}/runs/{run['run']}/tasks/{task_id}/callbacks/log",
                           params={"attempt": 1}, content="x")
    assert unsigned.status_code == 422
    assert "token" in unsigned.json()["detail"]
    wrong_run = dict(run, run=str(uuid.uuid4()))
    assert callback(anonymous, wrong_run, "log", content="x").status_code == 404
    assert callback(anonymous, run, "status", json={"state": "DONE"}).status_code == 422
    assert callback(anonymous, run, "storage", json=[1]).status_code == 422
    assert callback(anonymous, run, "storage", content="x",
                    headers={"Content-Type": "text/plain"}).status_code == 415
    assert task_of(client, run)["state"] == "READY"
    assert logs(client, run) == []


@pytest.fixture
def keyless(api_settings: Settings) -> Iterator[TestClient]:
    app = create_app(api_settings.model_copy(update={"secret_key": None}))
    with TestClient(app, headers=auth_headers()) as c:
        yield c


def test_an_api_without_a_secret_key_verifies_no_callback(
    client: TestClient, keyless: TestClient, engine: BatchApplier,
) -> None:
    run = one_task_run(client, engine)
    refused = callback(keyless, run, "log", content="x")
    assert refused.status_code == 403
    assert "STELLWERK_SECRET_KEY" in refused.json()["detail"]


@pytest.mark.parametrize("detached", [False, True], ids=["worker-lease", "detached"])
def test_a_post_back_completes_an_active_task_once_and_repeats_are_answered_alike(
    client: TestClient, engine: BatchApplier, api_settings: Settings, detached: bool,
) -> None:
    """ACTIVE is the usual state for a post-back, not READY: the attempt was started.

    By a worker holding a lease (the post-back overtakes it, so the worker is told to
    stop) or detached, as a connector hands an attempt to a web service that reports
    later (nobody runs it here, so nothing is told to stop).
    """
    run = one_task_run(client, engine, timeout=300)
    task_id = uuid.UUID(run["task"]["id"])
    started = TaskResult(task_run_id=task_id, run_id=uuid.UUID(run["run"]), attempt=1,
                         kind="started", worker="connector-1", detached=detached)
    assert engine.apply([Incoming(started.message_id, started.run_id, started)]).applied == 1
    assert task_of(client, run)["state"] == "ACTIVE"

    body = {"state": "COMPLETED", "output": {"rows": 5}, "message": "done", "attempt": 1}
    assert outcome(client, run, body).status_code == 204
    task = task_of(client, run)
    assert (task["state"], task["output"], task["message"], task["attempt"]) == (
        "COMPLETED", {"rows": 5}, "done", 1)
    assert client.get(f"{BASE}/runs/{run['run']}").json()["state"] == "COMPLETED"
    with redis.Redis.from_url(api_settings.require_urls()[1]) as client_redis:
        assert bool(client_redis.exists(cancel_key(f"{task_id}:1"))) is not detached

    assert outcome(client, run, body).status_code == 204  # identical: as the first
    assert outcome(client, run, {k: v for k, v in body.items() if k != "attempt"}
                   ).status_code == 204
    other = outcome(client, run, {**body, "state": "FAILED"})
    assert other.status_code == 409
    assert other.json()["detail"].startswith("task 'a' is COMPLETED")
    assert task_of(client, run) == task
    journal = client.get(f"{BASE}/runs/{run['run']}/journal").json()["entries"]
    assert [(e["from"], e["actor"]) for e in journal
            if e["task"] == "a" and e["to"] == "COMPLETED"] == [("ACTIVE", "admin")]
