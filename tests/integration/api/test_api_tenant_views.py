"""A tenant-bound token sees only its tenant in ``/metrics`` and ``/processors`` (issue 14).

Two tenants each get a job whose single task is READY, of a type of its own; each
tenant's token must count and name its own task and not the other's, and gets none of
the system-wide figures (queue depths, workers, loop timings). The admin sees both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete, update
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import ApiToken, Job, TaskRun

JobBody = Callable[..., dict[str, Any]]


class Tenant:
    """A tenant with a ``job.read`` token and one READY task of type ``task_type``."""

    def __init__(self, client: TestClient, job_body: JobBody,
                 sessions: sessionmaker[Session]) -> None:
        self.name = f"tenant-{uuid.uuid4().hex[:8]}"
        self.task_type = f"probe_{uuid.uuid4().hex[:8]}"
        token = client.post("/api/v1/tokens", json={
            "name": self.name, "scopes": ["job"], "tenant": self.name}).json()
        self.token_id, self.headers = token["id"], {"Authorization": f"Bearer {token['token']}"}
        job = client.post("/api/v1/jobs", headers=self.headers, json=job_body(
            tasks=[{"name": "a", "type": self.task_type}])).json()
        self.job_id = job["id"]
        with sessions.begin() as session:
            session.execute(update(TaskRun).where(TaskRun.run_id == job["run_id"])
                            .values(state="READY"))


@pytest.fixture
def tenants(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> Iterator[tuple[Tenant, Tenant]]:
    pair = (Tenant(client, job_body, sessions), Tenant(client, job_body, sessions))
    yield pair
    with sessions.begin() as session:
        session.execute(delete(Job).where(Job.id.in_([t.job_id for t in pair])))
        session.execute(delete(ApiToken).where(ApiToken.id.in_([t.token_id for t in pair])))


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def _ready_of(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float],
              task_type: str) -> float | None:
    return samples.get(("stellwerk_tasks_by_type", (("state", "READY"), ("type", task_type))))


def test_a_tenant_token_s_metrics_count_its_tenant_only(
    client: TestClient, tenants: tuple[Tenant, Tenant],
) -> None:
    mine, theirs = tenants
    response = client.get("/api/v1/metrics", headers=mine.headers)

    assert response.status_code == 200, response.text
    samples = _samples(response.text)
    assert _ready_of(samples, mine.task_type) == 1
    assert _ready_of(samples, theirs.task_type) is None
    assert samples[("stellwerk_runs", (("state", "READY"),))] <= 1  # its one run at most
    names = {name for name, _ in samples}
    assert not names & {"stellwerk_queue_depth", "stellwerk_workers",
                        "stellwerk_loop_seconds_count"}

    admin = _samples(client.get("/api/v1/metrics").text)
    assert _ready_of(admin, mine.task_type) == _ready_of(admin, theirs.task_type) == 1
    assert ("stellwerk_workers", ()) in admin


def test_a_tenant_token_s_processors_show_its_ready_tasks_only(
    client: TestClient, tenants: tuple[Tenant, Tenant],
) -> None:
    mine, theirs = tenants
    response = client.get("/api/v1/processors", headers=mine.headers)

    assert response.status_code == 200, response.text
    by_type = {p["type"]: p for p in response.json()["data"]}
    assert by_type[mine.task_type]["ready"] == 1
    assert theirs.task_type not in by_type
    admin = {p["type"]: p for p in client.get("/api/v1/processors").json()["data"]}
    assert admin[mine.task_type]["ready"] == admin[theirs.task_type]["ready"] == 1


def test_no_metric_label_is_called_instance(client: TestClient) -> None:
    """Prometheus sets ``instance`` itself and renames a scraped one."""
    text = client.get("/api/v1/metrics").text
    labels = {label for family in text_string_to_metric_families(text)
              for s in family.samples for label in s.labels}
    assert "instance" not in labels
