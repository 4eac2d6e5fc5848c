"""``GET /metrics`` counts from PostgreSQL and Redis; ``GET /healthz`` names what is down."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.messaging.loop_timings import LoopTimings
from common.persistence.models import Run, TaskRun
from scheduler.api.app import create_app

JobBody = Callable[..., dict[str, Any]]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def test_metrics_count_runs_tasks_and_queues(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session], rds: redis.Redis,
) -> None:
    assert client.post("/api/v1/jobs", json=job_body()).status_code == 201
    rds.lpush("tasks.metrics-probe", b"x", b"y")
    before = _counts(sessions)  # the e2e system shares the database and moves runs on

    response = client.get("/api/v1/metrics")

    after = _counts(sessions)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    assert samples[("stellwerk_state_counts_up", ())] == 1
    for name, state in (("runs", "READY"), ("runs", "TIMEOUT"), ("tasks", "WAITING")):
        low, high = sorted((before[name, state], after[name, state]))
        assert low <= samples[(f"stellwerk_{name}", (("state", state),))] <= high
    assert samples[("stellwerk_tasks_by_type", (("state", "WAITING"), ("type", "shell")))] >= 1
    activation = ("stellwerk_queue_depth", (("queue", "stellwerk.activation"),))
    assert samples[activation] == rds.llen("stellwerk.activation") >= 1
    # A type nobody serves and no task needs is not looked up: only known types are.
    assert ("stellwerk_queue_depth", (("queue", "tasks.metrics-probe"),)) not in samples
    assert ("stellwerk_queue_depth", (("queue", "tasks.shell"),)) in samples
    rds.delete("tasks.metrics-probe")


def _counts(sessions: sessionmaker[Session]) -> dict[tuple[str, str], int]:
    queries = {
        ("runs", "READY"): select(func.count()).where(Run.state == "READY"),
        ("runs", "TIMEOUT"): select(func.count()).where(Run.state == "TIMEOUT"),
        ("tasks", "WAITING"): select(func.count()).where(TaskRun.state == "WAITING"),
    }
    with sessions() as session:
        return {key: int(session.scalar(query) or 0) for key, query in queries.items()}


def test_metrics_need_a_token(anonymous: TestClient) -> None:
    assert anonymous.get("/api/v1/metrics").status_code == 401


def test_health_names_the_dependency_that_is_down(api_settings: Settings) -> None:
    closed = "127.0.0.1:9"  # the discard port: nothing listens there
    for broken, update in [
        ("redis", {"redis_url": f"redis://{closed}/0"}),
        ("database", {"database_url": f"postgresql://postgres@{closed}/postgres"}),
    ]:
        app = create_app(api_settings.model_copy(update=update))
        with TestClient(app) as anonymous:
            response = anonymous.get("/api/v1/healthz")

        assert response.status_code == 503, response.text
        body = response.json()
        assert body["status"] == "error"
        assert body[broken].startswith("error")
        healthy = {"redis", "database"} - {broken}
        assert all(body[name] == "ok" for name in healthy)


def test_metrics_show_the_loop_timings_each_process_writes(
    client: TestClient, rds: redis.Redis,
) -> None:
    timings = LoopTimings(rds, "probe_loop", instance="host:1")
    for seconds in (0.0005, 0.003, 0.003, 7.0):
        timings.observe(seconds)
    timings.flush()

    samples = _samples(client.get("/api/v1/metrics").text)

    # The process label is ``process``: Prometheus owns ``instance`` (issue 14).
    labels = (("loop", "probe_loop"), ("process", "host:1"))
    assert samples[("stellwerk_loop_seconds_count", labels)] == 4
    assert samples[("stellwerk_loop_seconds_sum", labels)] == pytest.approx(7.0065)
    for bound, count in (("0.001", 1), ("0.005", 3), ("+Inf", 4)):
        bucket = (("le", bound), ("loop", "probe_loop"), ("process", "host:1"))
        assert samples[("stellwerk_loop_seconds_bucket", bucket)] == count
    rds.delete("stellwerk:timings:probe_loop:host:1")
