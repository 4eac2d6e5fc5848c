"""The reads the API answers on its event loop: a job and a run (``Resources.reads``)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from common.config import Settings
from scheduler.api.app import create_app
from scheduler.api.errors import RETRY_AFTER_S
from scheduler.api.resources import READS_APPLICATION, READS_WAIT
from tests.integration.api.conftest import JobBody, auth_headers


@pytest.fixture
def job(client: TestClient, job_body: JobBody) -> dict[str, Any]:
    """A one-off job with params and a bound and a plain task: its run starts at once."""
    body = job_body(params={"region": "eu"}, tasks=[
        {"name": "fetch", "type": "noop", "params": {"n": 1}, "next": ["store"]},
        {"name": "store", "type": "sleep", "params": {"seconds": 1}},
    ])
    response = client.post("/api/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_reads_survive_the_loss_of_their_connections(
    client: TestClient, api_settings: Settings, job: dict[str, Any],
) -> None:
    """A server restart drops every pooled connection: a read that meets one is tried
    again once the pool has dropped every broken one, not answered with an error."""
    run = {"id": job["run_id"]}
    assert client.get(f"/api/v1/jobs/{job['id']}").status_code == 200
    assert client.get(f"/api/v1/runs/{run['id']}").status_code == 200
    reads = client.app.state.resources.reads  # type: ignore[attr-defined]

    async def hold_three() -> None:  # three idle connections in the pool: three to lose
        async with reads.connection() as a, reads.connection() as b, \
                reads.connection() as c:
            for conn in (a, b, c):
                await conn.execute("SELECT 1")

    assert client.portal is not None
    client.portal.call(hold_three)
    assert api_settings.database_url is not None
    with psycopg.connect(api_settings.database_url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            (READS_APPLICATION,)).fetchall()
    assert ended and all(row[0] for row in ended)
    read = client.get(f"/api/v1/jobs/{job['id']}")
    assert read.status_code == 200, read.text
    assert read.json()["id"] == job["id"]
    polled = client.get(f"/api/v1/runs/{run['id']}")
    assert polled.status_code == 200, polled.text
    assert polled.json()["id"] == run["id"]


def test_a_job_and_a_run_read_on_the_loop_are_what_the_session_reads(
    client: TestClient, job: dict[str, Any],
) -> None:
    """The create's answer is read through the Session; a read of the same job through
    the loop's connection answers the same document."""
    assert client.get(f"/api/v1/jobs/{job['id']}").json() == job


@pytest.fixture
def unreachable(api_settings: Settings) -> Iterator[TestClient]:
    """An API whose PostgreSQL is a port nothing listens on."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    nowhere = api_settings.model_copy(update={
        "database_url": f"postgresql://nobody@127.0.0.1:{port}/nothing"})
    with TestClient(create_app(nowhere), headers=auth_headers(),
                    raise_server_exceptions=False) as client:
        yield client


def test_a_read_while_postgresql_cannot_be_reached_fails_after_its_wait(
    unreachable: TestClient,
) -> None:
    """The pool keeps trying in the background; the read does not wait for it forever,
    and says the database is down (a 503 a client may retry), not that it broke."""
    started = time.monotonic()
    read = unreachable.get(f"/api/v1/runs/{uuid.uuid4()}")
    waited_s = time.monotonic() - started
    assert read.status_code == 503, read.text
    assert read.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert read.json()["detail"] == "PostgreSQL is unreachable; nothing was changed, try again"
    assert READS_WAIT.total_seconds() - 0.5 <= waited_s < READS_WAIT.total_seconds() + 5


def test_a_create_while_postgresql_cannot_be_reached_is_a_503(
    unreachable: TestClient, job_body: JobBody,
) -> None:
    """The sync routes (a Session on a request thread) answer the same."""
    created = unreachable.post("/api/v1/jobs", json=job_body())
    assert created.status_code == 503, created.text
    assert created.headers["content-type"] == "application/problem+json"
    assert "PostgreSQL is unreachable" in created.json()["detail"]
