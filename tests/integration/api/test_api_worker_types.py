"""Worker types over REST: registration, secrets kept sealed, binding of job tasks, dispatch."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.worker_types import WorkerTypeSpec
from common.messaging.messages import TaskDispatch
from common.persistence.models import Task
from common.secure_params import SecretBox
from scheduler.engine.batch import BatchApplier
from scheduler.services import worker_types
from tests.integration.api.conftest import Queued, start_run, wait_for_a_lock_wait

BASE = "/api/v1"
SECRET = "type-secret-value"


def register(client: TestClient, **body: Any) -> Any:
    body.setdefault("name", f"render-{uuid.uuid4().hex[:8]}")
    body.setdefault("url", "https://type.example/render")
    return client.post(f"{BASE}/worker-types", json=body)


@pytest.fixture
def worker_type(client: TestClient) -> Iterator[dict[str, Any]]:
    response = register(
        client, headers={"Authorization": f"Bearer {SECRET}", "X-Team": "type"},
        job_template={"params": {"quality": "high"}, "timeout": 90, "retries": 1},
    )
    assert response.status_code == 201, response.text
    yield response.json()


def test_a_worker_type_shows_its_header_names_never_their_values(
    client: TestClient, worker_type: dict[str, Any]
) -> None:
    name = worker_type["name"]
    assert worker_type["headers"] == ["Authorization", "X-Team"]
    assert worker_type["job_template"] == {"params": {"quality": "high"}, "timeout": 90.0,
                                           "retries": 1, "retry_backoff": None}
    listed = client.get(f"{BASE}/worker-types")
    one = client.get(f"{BASE}/worker-types/{name}")
    assert name in [t["name"] for t in listed.json()["data"]]
    assert one.json() == worker_type
    for response in (listed, one):
        assert SECRET not in response.text
    again = register(client, name=name)
    assert again.status_code == 409
    assert name in again.json()["detail"]
    assert client.get(f"{BASE}/worker-types/nope").status_code == 404


def test_two_registrations_of_one_name_at_once_are_one_type_and_a_conflict(
    client: TestClient, sessions: sessionmaker[Session], api_settings: Settings,
) -> None:
    """A registration that meets another one's type of its name, not yet committed,
    waits for it and answers 409 (a read before the insert missed it: a 500)."""
    name = f"render-{uuid.uuid4().hex[:8]}"
    spec = WorkerTypeSpec.model_validate({"name": name, "url": "https://type.example/a"})
    with sessions() as first, ThreadPoolExecutor(1) as pool:
        worker_types.register(first, spec, datetime.now(UTC), SecretBox(None), "test")
        second = pool.submit(register, client, name=name)
        wait_for_a_lock_wait(api_settings)
        first.commit()
        answer = second.result(timeout=30)
    assert answer.status_code == 409, answer.text
    assert name in answer.json()["detail"]
    assert client.get(f"{BASE}/worker-types/{name}").json()["url"] == "https://type.example/a"


@pytest.mark.parametrize(("body", "where"), [
    ({"name": "shell"}, "name"),
    ({"url": "https://u:p@type.example/"}, "url"),
    ({"headers": {"X-Key": "a\nb"}}, "headers"),
    ({"job_template": {"params": {"headers": {}}}}, "job_template.params"),
    ({"engine": "grpc"}, "engine"),
])
def test_bad_worker_types_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], where: str
) -> None:
    response = register(client, **body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(where)


def test_a_tenant_bound_token_reads_worker_types_but_registers_none(client: TestClient) -> None:
    minted = client.post(f"{BASE}/tokens", json={"name": f"t-{uuid.uuid4().hex[:6]}",
                                                   "scopes": ["job"], "tenant": "acme"})
    headers = {"Authorization": f"Bearer {minted.json()['token']}"}
    refused = client.post(f"{BASE}/worker-types", headers=headers,
                          json={"name": "acme-type", "url": "https://acme.example/"})
    assert refused.status_code == 403
    assert "every tenant" in refused.json()["detail"]
    assert client.get(f"{BASE}/worker-types", headers=headers).status_code == 200


def bound_job(client: TestClient, type_name: str) -> dict[str, Any]:
    body = {
        "name": f"bound-{uuid.uuid4().hex[:8]}", "webservice": {"url": "https://job.example/render",
                                        "headers": {"x-team": "job", "X-Job-Key": "job-secret"}},
        "tasks": [{"name": "render", "type": type_name, "params": {"frames": 2}, "next": ["tail"]},
                  {"name": "tail", "type": "noop"}],
    }
    response = client.post(f"{BASE}/jobs", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def stored_binding(sessions: sessionmaker[Session], task_id: str) -> Any:
    with sessions() as session:
        return session.scalar(select(Task.binding).where(Task.id == uuid.UUID(task_id)))


def test_a_task_of_a_registered_type_is_dispatched_to_the_webservice_queue(
    client: TestClient, worker_type: dict[str, Any], engine: BatchApplier, queued: Queued,
    *, api_settings: Settings, sessions: sessionmaker[Session],
) -> None:
    job = bound_job(client, worker_type["name"])
    assert job["webservice"] == {"url": "https://job.example/render",
                                 "headers": ["X-Job-Key", "x-team"]}
    assert "job-secret" not in client.get(f"{BASE}/jobs/{job['id']}").text
    render, tail = job["tasks"]
    assert (render["type"], render["timeout"], render["retries"]) == (worker_type["name"], 90, 1)
    assert render["params"] == {"frames": 2}  # as given; the binding is not shown
    assert stored_binding(sessions, tail["id"]) is None

    start_run(engine, job["run_id"])
    sent = [m for m in queued("tasks.webservice") if m["payload"]["run_id"] == job["run_id"]]
    (message,) = sent
    dispatch = TaskDispatch.model_validate(message["payload"])
    assert (message["task"], dispatch.type, dispatch.task) == (
        "stellwerk.execute", "webservice", "render")
    assert dispatch.params == {"quality": "high", "frames": 2,
                               "url": "https://job.example/render"}
    assert dispatch.timeout_s == 90
    assert dispatch.sealed_secure_params is not None
    assert SECRET not in message["id"] + str(message["payload"])  # sealed on the wire
    opened = SecretBox(api_settings.secret_key).open(dispatch.sealed_secure_params)
    assert opened == {"headers": {"Authorization": f"Bearer {SECRET}", "x-team": "job",
                                  "X-Job-Key": "job-secret"}}
    run = client.get(f"{BASE}/runs/{job['run_id']}").json()
    assert [(t["name"], t["type"], t["state"]) for t in run["tasks"]] == [
        ("render", worker_type["name"], "READY"), ("tail", "noop", "WAITING")]


def test_a_used_worker_type_cannot_be_deleted_and_a_patch_rebinds_keeping_headers(
    client: TestClient, worker_type: dict[str, Any], sessions: sessionmaker[Session],
    api_settings: Settings,
) -> None:
    name = worker_type["name"]
    job = bound_job(client, name)
    refused = client.delete(f"{BASE}/worker-types/{name}")
    assert refused.status_code == 409
    assert job["id"] in refused.json()["detail"]

    assert client.post(f"{BASE}/runs/{job['run_id']}/cancel").status_code == 200
    patched = client.patch(f"{BASE}/jobs/{job['id']}",
                           json={"webservice": {"url": "https://moved.example/"}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["webservice"]["headers"] == ["X-Job-Key", "x-team"]
    render = patched.json()["tasks"][0]
    assert (render["timeout"], render["retries"]) == (90, 1)  # still the template's
    binding = stored_binding(sessions, render["id"])
    assert binding["params"]["url"] == "https://moved.example/"
    opened = SecretBox(api_settings.secret_key).open(binding["sealed_secure_params"])
    assert opened["headers"]["X-Job-Key"] == "job-secret"

    assert client.delete(f"{BASE}/jobs/{job['id']}").status_code == 204
    assert client.delete(f"{BASE}/worker-types/{name}").status_code == 204
    assert client.get(f"{BASE}/worker-types/{name}").status_code == 404
    assert client.delete(f"{BASE}/worker-types/{name}").status_code == 404
