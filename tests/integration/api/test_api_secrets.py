"""Secure params through the API: stored sealed, kept by PATCH, never returned."""

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.secure_params import SecretBox
from scheduler.api.app import create_app
from scheduler.engine.structure import load_structures
from tests.integration.api.conftest import JobBody, auth_headers

JOBS = "/api/v1/jobs"
JOB_SECRET = "job-secret-4711-hunter2"
TASK_SECRET = "task-secret-swordfish"


@pytest.fixture
def box(api_settings: Settings) -> SecretBox:
    return SecretBox(api_settings.secret_key)


def secret_body(job_body: JobBody, **overrides: Any) -> dict[str, Any]:
    body = job_body(**{"name": f"secretive-{uuid.uuid4().hex[:8]}", "draft": True, **overrides,
                       "secure_params": {"password": JOB_SECRET, "pin": 9021077345}})
    body["tasks"][2]["secure_params"] = {"token": TASK_SECRET}
    return body


def stored(sessions: sessionmaker[Session], job_id: str) -> tuple[str, dict[str, str | None]]:
    """The job's sealed column and its tasks' by name."""
    with sessions() as session:
        job = session.execute(text("SELECT secure_params FROM jobs WHERE id = :id"),
                              {"id": job_id}).scalar_one()
        tasks = session.execute(text("SELECT name, secure_params FROM tasks WHERE job_id = :id"),
                                {"id": job_id}).all()
    return job, {name: sealed for name, sealed in tasks}


def plaintext_anywhere(sessions: sessionmaker[Session], needle: str) -> list[str]:
    """Every table whose rows, as text, contain ``needle``."""
    with sessions() as session:
        tables = session.execute(text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        return [table for table in tables if session.execute(
            text(f'SELECT EXISTS (SELECT 1 FROM "{table}" t WHERE t::text LIKE :n)'),
            {"n": f"%{needle}%"}).scalar_one()]


def test_the_database_holds_secure_params_sealed_only(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session], box: SecretBox
) -> None:
    job = client.post(JOBS, json=secret_body(job_body)).json()
    client.post(f"{JOBS}/{job['id']}/commit").raise_for_status()

    sealed_job, sealed_tasks = stored(sessions, job["id"])
    assert box.open(sealed_job) == {"password": JOB_SECRET, "pin": 9021077345}
    assert sealed_tasks["a"] is None and sealed_tasks["c"] is not None
    assert box.open(sealed_tasks["c"]) == {"token": TASK_SECRET}
    for needle in (JOB_SECRET, TASK_SECRET, "9021077345"):
        assert plaintext_anywhere(sessions, needle) == []


def test_the_engine_reads_them_sealed_and_never_opens_them(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session]
) -> None:
    job = client.post(JOBS, json=secret_body(job_body)).json()
    sealed_job, sealed_tasks = stored(sessions, job["id"])
    with sessions() as session:
        conn = session.connection().connection.driver_connection
        assert isinstance(conn, psycopg.Connection)
        (structure,) = load_structures(conn, [uuid.UUID(job["id"])])
    assert structure.sealed_secure_params == sealed_job
    assert structure.tasks["c"].sealed_secure_params == sealed_tasks["c"]


def test_each_write_seals_anew_and_patch_keeps_what_it_does_not_mention(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session], box: SecretBox
) -> None:
    first = client.post(JOBS, json=secret_body(job_body)).json()
    second = client.post(JOBS, json=secret_body(job_body)).json()
    assert stored(sessions, first["id"])[0] != stored(sessions, second["id"])[0]
    before = stored(sessions, first["id"])

    # A client sends back the graph as it reads it: without secure params.
    response = client.patch(f"{JOBS}/{first['id']}", json={
        "params": {"x": 1},
        "tasks": [{"name": t["name"], "type": t["type"], "params": t["params"], "next": t["next"]}
                  for t in first["tasks"]],
    })
    assert response.status_code == 200, response.text
    after = stored(sessions, first["id"])
    assert after[0] != before[0] and after[1]["c"] != before[1]["c"]  # sealed again
    assert box.open(after[0])["password"] == JOB_SECRET
    assert box.open(after[1]["c"] or "") == {"token": TASK_SECRET}

    response = client.patch(f"{JOBS}/{first['id']}",
                            json={"secure_params": {"password": "new-pw-1"}})
    assert response.status_code == 200, response.text
    assert box.open(stored(sessions, first["id"])[0]) == {"password": "new-pw-1"}


def test_no_response_shows_them(client: TestClient, job_body: JobBody) -> None:
    job = client.post(JOBS, json=secret_body(job_body, draft=False)).json()
    responses = [
        json.dumps(job),
        client.get(f"{JOBS}/{job['id']}").text,
        client.get(JOBS).text,
        client.get(f"/api/v1/runs/{job['run_id']}").text,
        client.get(f"/api/v1/runs/{job['run_id']}/journal").text,
        client.get(f"{JOBS}/{job['id']}/runs").text,
        client.patch(f"{JOBS}/{job['id']}", json={"name": f"renamed-{uuid.uuid4().hex[:8]}"}).text,
    ]
    for body in responses:
        assert JOB_SECRET not in body and TASK_SECRET not in body and "9021077345" not in body
        assert "secure_params" not in body


@pytest.fixture
def keyless(api_settings: Settings) -> Iterator[TestClient]:
    settings = api_settings.model_copy(update={"secret_key": None})
    with TestClient(create_app(settings), headers=auth_headers()) as c:
        yield c


def test_without_a_key_secure_params_are_refused_and_nothing_is_written(
    keyless: TestClient, job_body: JobBody, job_count: Any
) -> None:
    before = job_count()
    response = keyless.post(JOBS, json=secret_body(job_body))
    assert response.status_code == 422
    assert "STELLWERK_SECRET_KEY" in response.json()["detail"]
    assert "secure_params" in response.json()["detail"]
    assert job_count() == before
    plain = keyless.post(JOBS, json=job_body(draft=True))
    assert plain.status_code == 201, plain.text
