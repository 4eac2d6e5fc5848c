"""``POST /prune`` (issue 14): retention on demand, within the caller's tenant."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import Run
from tests.integration.api.test_api_tokens import BASE, bearer, create_job, mint

LONG_AGO = datetime.now(UTC) - timedelta(days=3)


def finished_job(client: TestClient, sessions: sessionmaker[Session], tenant: str) -> str:
    """A one-off job of ``tenant`` whose run finished three days ago; its id."""
    body = {"name": "pruned", "tenant": tenant, "tasks": [{"name": "a", "type": "unserved"}]}
    job: dict[str, Any] = create_job(client, body).json()
    with sessions.begin() as session:
        session.execute(update(Run).where(Run.id == uuid.UUID(job["run_id"]))
                        .values(state="COMPLETED", finished_at=LONG_AGO))
    return str(job["id"])


def runs_of(sessions: sessionmaker[Session], job_id: str) -> int:
    with sessions() as session:
        return len(session.scalars(select(Run.id).where(Run.job_id == uuid.UUID(job_id))).all())


def test_a_tenant_bound_token_prunes_its_tenant_only(
    client: TestClient, sessions: sessionmaker[Session],
) -> None:
    mine, theirs = f"prune-{uuid.uuid4().hex[:6]}", f"prune-{uuid.uuid4().hex[:6]}"
    own, other = finished_job(client, sessions, mine), finished_job(client, sessions, theirs)
    token = mint(client, scopes=["job"], tenant=mine)["token"]

    answer = client.post(f"{BASE}/prune", json={"older_than_s": 86400, "keep_runs": 0},
                         headers=bearer(token))

    assert answer.status_code == 200, answer.text
    assert {k: answer.json()[k] for k in ("tenant", "keep_runs", "runs", "more")} == {
        "tenant": mine, "keep_runs": 0, "runs": 1, "more": False}
    assert (runs_of(sessions, own), runs_of(sessions, other)) == (0, 1)


def test_a_tenant_bound_token_naming_another_tenant_is_403(
    client: TestClient, sessions: sessionmaker[Session],
) -> None:
    theirs = f"prune-{uuid.uuid4().hex[:6]}"
    other = finished_job(client, sessions, theirs)
    token = mint(client, scopes=["job"], tenant=f"prune-{uuid.uuid4().hex[:6]}")["token"]

    answer = client.post(f"{BASE}/prune", json={"older_than_s": 0, "keep_runs": 0,
                                                 "tenant": theirs}, headers=bearer(token))

    assert answer.status_code == 403
    assert f"cannot prune tenant {theirs!r}" in answer.json()["detail"]
    assert runs_of(sessions, other) == 1


def test_the_last_runs_kept_default_to_the_setting_and_recent_runs_stay(
    client: TestClient, sessions: sessionmaker[Session],
) -> None:
    tenant = f"prune-{uuid.uuid4().hex[:6]}"
    job = finished_job(client, sessions, tenant)

    kept = client.post(f"{BASE}/prune", json={"older_than_s": 0, "tenant": tenant})
    recent = client.post(f"{BASE}/prune", json={"older_than_s": 4 * 86400, "keep_runs": 0,
                                                "tenant": tenant})

    assert (kept.json()["keep_runs"], kept.json()["runs"]) == (10, 0)
    assert recent.json()["runs"] == 0
    assert runs_of(sessions, job) == 1


def test_a_negative_age_is_422_naming_the_field(client: TestClient) -> None:
    answer = client.post(f"{BASE}/prune", json={"older_than_s": -1})

    assert answer.status_code == 422
    assert "older_than_s" in answer.text
