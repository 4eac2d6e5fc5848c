"""A task type no live worker serves: accepted with a warning, and its READY task says why.

Issue 14: a task of a type nobody serves used to wait READY with no hint anywhere. The
live workers are real liveness records in the API's Redis, as the worker runtime writes
them; each test runs its own app, so the API's one-second cache of them starts empty.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import delete, update
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.messaging.liveness import LivenessBeacon
from common.persistence.models import Job, TaskRun
from scheduler.api.app import create_app
from tests.integration.api.conftest import auth_headers

JobBody = Callable[..., dict[str, Any]]


@pytest.fixture
def served_type(rds: redis.Redis) -> Iterator[str]:
    """A type of this test's own, served by a live worker record."""
    served = f"served_{uuid.uuid4().hex[:8]}"
    hostname = f"celery@test-{uuid.uuid4().hex[:8]}"
    with LivenessBeacon(rds, hostname, [served], 1, refresh=timedelta(hours=1)):
        yield served


@pytest.fixture
def fresh_client(api_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(api_settings), headers=auth_headers()) as client:
        yield client


@pytest.fixture
def created_jobs(sessions: sessionmaker[Session]) -> Iterator[list[str]]:
    ids: list[str] = []
    yield ids
    with sessions.begin() as session:
        session.execute(delete(Job).where(Job.id.in_(ids)))


def test_a_job_with_an_unserved_type_is_accepted_with_a_warning_and_its_task_says_why(
    fresh_client: TestClient, job_body: JobBody, served_type: str,
    sessions: sessionmaker[Session], created_jobs: list[str],
) -> None:
    lonely = f"lonely_{uuid.uuid4().hex[:8]}"
    tasks = [{"name": "a", "type": served_type, "next": ["b"]}, {"name": "b", "type": lonely}]

    created = fresh_client.post("/api/v1/jobs", json=job_body(tasks=tasks))

    assert created.status_code == 201, created.text
    job = created.json()
    created_jobs.append(job["id"])
    assert job["warnings"] == [f"no worker serves type {lonely!r}: its tasks wait READY until "
                               "one starts or their outcome is posted"]
    with sessions.begin() as session:
        session.execute(update(TaskRun).where(TaskRun.run_id == job["run_id"])
                        .values(state="READY"))
    run = fresh_client.get(f"/api/v1/runs/{job['run_id']}").json()
    waiting = {task["name"]: task["waiting_for"] for task in run["tasks"]}
    assert waiting == {"a": None, "b": f"no worker serves type {lonely!r}"}


def test_a_job_whose_types_are_all_served_has_no_warning(
    fresh_client: TestClient, job_body: JobBody, served_type: str, created_jobs: list[str],
) -> None:
    created = fresh_client.post(
        "/api/v1/jobs", json=job_body(tasks=[{"name": "a", "type": served_type}])
    )

    assert created.status_code == 201, created.text
    created_jobs.append(created.json()["id"])
    assert created.json()["warnings"] == []
    assert fresh_client.get(f"/api/v1/jobs/{created.json()['id']}").json()["warnings"] == []
