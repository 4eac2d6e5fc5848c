"""``GET /processors`` from real worker liveness keys in Redis, and ``GET /healthz``."""

from __future__ import annotations

import os
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

JobBody = Callable[..., dict[str, Any]]


@pytest.fixture
def worker(rds: redis.Redis) -> Iterator[str]:
    """A live worker serving ``noop`` and ``sleep``, as the worker runtime records it."""
    hostname = f"celery@test-{uuid.uuid4().hex[:8]}"
    with LivenessBeacon(rds, hostname, ["noop", "sleep"], 4, refresh=timedelta(hours=1)):
        yield hostname


@pytest.fixture
def waiting_on_nobody(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> Iterator[str]:
    """A READY task of a type no worker serves; its job is removed afterwards."""
    lonely = f"lonely_{uuid.uuid4().hex[:8]}"
    job = client.post("/api/v1/jobs", json=job_body(
        tasks=[{"name": "a", "type": lonely}])).json()
    with sessions.begin() as session:
        session.execute(update(TaskRun).where(TaskRun.run_id == job["run_id"])
                        .values(state="READY"))
    yield lonely
    with sessions.begin() as session:
        session.execute(delete(Job).where(Job.id == job["id"]))


def test_types_show_their_live_workers_and_unserved_ready_types(
    client: TestClient, worker: str, waiting_on_nobody: str,
) -> None:
    response = client.get("/api/v1/processors")

    assert response.status_code == 200
    by_type = {p["type"]: p for p in response.json()["data"]}
    assert by_type["noop"]["served"] is True
    assert [w["hostname"] for w in by_type["noop"]["workers"]] == [worker]
    assert by_type["noop"]["workers"][0] | {"started_at": None, "seen_at": None} == {
        "hostname": worker, "types": ["noop", "sleep"], "concurrency": 4, "pid": os.getpid(),
        "started_at": None, "seen_at": None}
    assert by_type["sleep"]["served"] is True
    assert by_type[waiting_on_nobody] == {
        "type": waiting_on_nobody, "served": False, "ready": 1, "workers": []}


def test_health_is_503_when_redis_is_unreachable(api_settings: Settings) -> None:
    broken = api_settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})

    with TestClient(create_app(broken)) as client:
        response = client.get("/api/v1/healthz")

    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"]) == ("error", "ok")
    assert body["redis"].startswith("error")


def test_path_prefix_moves_the_api(api_settings: Settings) -> None:
    prefixed = api_settings.model_copy(update={"path_prefix": "/stellwerk/"})

    with TestClient(create_app(prefixed)) as client:
        assert client.get("/stellwerk/api/v1/healthz").status_code == 200
        assert client.get("/stellwerk/api/v1/openapi.json").status_code == 200
        assert client.get("/api/v1/healthz").status_code == 404
