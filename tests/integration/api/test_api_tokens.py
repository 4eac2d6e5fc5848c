"""API tokens, scopes and tenants (docs/decisions.md) against the real API and PostgreSQL."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.persistence.models import ApiToken, Job
from scheduler.api.app import create_app
from tests.integration.api.conftest import FROZEN_AT, JobBody, auth_headers

BASE = "/api/v1"
# Routes that need no token (load balancers, compose health checks), web-service
# callbacks, whose signed URL is their credential (tested in test_api_callbacks.py), and
# /whoami, which any valid token may ask about itself (test_api_web_ui.py).
UNSCOPED = {f"{BASE}/healthz", f"{BASE}/whoami",
            *(f"{BASE}/runs/{{run_id}}/tasks/{{task_run_id}}/callbacks/{kind}"
              for kind in ("log", "storage", "status"))}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def mint(client: TestClient, *, by: str | None = None, **body: Any) -> dict[str, Any]:
    """Create a token (by the admin unless ``by``); the answer includes its value."""
    body.setdefault("name", f"t-{uuid.uuid4().hex[:8]}")
    headers = bearer(by) if by else auth_headers()
    response = client.post(f"{BASE}/tokens", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


def create_job(client: TestClient, body: dict[str, Any], token: str | None = None) -> Any:
    headers = bearer(token) if token else auth_headers()
    return client.post(f"{BASE}/jobs", json=body, headers=headers)


def test_the_value_is_shown_once_and_only_its_hash_is_stored(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    created = mint(client, scopes=["job.read"], tenant="acme")

    assert created["token"].startswith("stw_") and len(created["token"]) > 40
    assert created["scopes"] == ["job.read"] and created["tenant"] == "acme"
    listed = client.get(f"{BASE}/tokens").json()["data"]
    mine = next(t for t in listed if t["id"] == created["id"])
    assert "token" not in mine and created["token"] not in str(listed)
    with sessions() as session:
        row = session.get(ApiToken, uuid.UUID(created["id"]))
        assert row is not None
        assert row.token_hash == hashlib.sha256(created["token"].encode()).hexdigest()
        dump = session.execute(
            text("SELECT row_to_json(t)::text FROM api_tokens t WHERE id = :id"),
            {"id": created["id"]},
        ).scalar_one()
        assert created["token"] not in dump


def test_a_created_token_authenticates_and_signs_the_journal(client: TestClient) -> None:
    token = mint(client, name="ops", scopes=["job"])["token"]

    response = client.get(f"{BASE}/jobs", headers=bearer(token))

    assert response.status_code == 200, response.text
    listed = client.get(f"{BASE}/tokens", headers=bearer(token)).json()["data"]
    assert any(t["name"] == "ops" and t["created_by"] == "admin" for t in listed)


def test_a_deleted_token_is_refused_from_then_on(client: TestClient) -> None:
    created = mint(client, scopes=["job.read"])
    assert client.get(f"{BASE}/jobs", headers=bearer(created["token"])).status_code == 200

    assert client.delete(f"{BASE}/tokens/{created['id']}").status_code == 204

    response = client.get(f"{BASE}/jobs", headers=bearer(created["token"]))
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert client.delete(f"{BASE}/tokens/{created['id']}").status_code == 404


def test_an_expired_token_is_refused(api_settings: Settings, frozen_client: TestClient) -> None:
    expires = FROZEN_AT + timedelta(hours=1)
    token = mint(frozen_client, scopes=["job.read"], expires_at=expires.isoformat())["token"]
    assert frozen_client.get(f"{BASE}/jobs", headers=bearer(token)).status_code == 200

    later = create_app(api_settings, clock=lambda: expires)
    with TestClient(later) as client:
        response = client.get(f"{BASE}/jobs", headers=bearer(token))

    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"name": "x", "scopes": ["admin"]}, "scopes"),
        ({"name": "x", "scopes": []}, "scopes"),
        ({"name": "", "scopes": ["job"]}, "name"),
        ({"name": "x", "scopes": ["job"], "tenant": ""}, "tenant"),
        ({"name": "x", "scopes": ["job"], "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "x", "scopes": ["job"], "expires_at": "2099-01-01T00:00:00"}, "expires_at"),
        ({"name": "x", "scopes": ["job"], "owner": "me"}, "owner"),
    ],
)
def test_bad_token_requests_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], where: str
) -> None:
    before = len(client.get(f"{BASE}/tokens?limit=500").json()["data"])

    response = client.post(f"{BASE}/tokens", json=body)

    assert response.status_code == 422, response.text
    assert where in response.json()["detail"]
    assert len(client.get(f"{BASE}/tokens?limit=500").json()["data"]) == before


def test_a_token_cannot_create_one_with_more_scopes(client: TestClient) -> None:
    reader = mint(client, scopes=["job.read", "job.task"])["token"]

    response = client.post(
        f"{BASE}/tokens", json={"name": "x", "scopes": ["job"]}, headers=bearer(reader)
    )

    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert "more rights than its own" in response.json()["detail"]
    assert "scope 'job'" in response.json()["detail"]
    narrower = mint(client, by=reader, scopes=["job.task"])
    assert narrower["scopes"] == ["job.task"] and narrower["created_by"].startswith("token:")


@pytest.mark.parametrize(
    ("tenant", "named"),
    [(None, "no tenant"), ("globex", "tenant 'globex'")],
)
def test_a_tenant_bound_token_cannot_create_one_for_another_or_no_tenant(
    client: TestClient, tenant: str | None, named: str
) -> None:
    bound = mint(client, scopes=["job"], tenant="acme")["token"]
    body: dict[str, Any] = {"name": "x", "scopes": ["job.read"], "tenant": tenant}

    response = client.post(f"{BASE}/tokens", json=body, headers=bearer(bound))

    assert response.status_code == 403
    assert named in response.json()["detail"]
    assert "bound to tenant 'acme'" in response.json()["detail"]
    assert mint(client, by=bound, scopes=["job.read"], tenant="acme")["tenant"] == "acme"


def test_a_token_cannot_create_one_that_outlives_it(frozen_client: TestClient) -> None:
    expires = FROZEN_AT + timedelta(days=1)
    short = mint(frozen_client, scopes=["job"], expires_at=expires.isoformat())["token"]

    for later in (None, (expires + timedelta(seconds=1)).isoformat()):
        response = frozen_client.post(
            f"{BASE}/tokens", json={"name": "x", "scopes": ["job"], "expires_at": later},
            headers=bearer(short),
        )
        assert response.status_code == 403, later
        assert "expiry" in response.json()["detail"]
    within = mint(frozen_client, by=short, scopes=["job"], expires_at=expires.isoformat())
    assert datetime.fromisoformat(within["expires_at"]) == expires


def test_a_tenant_bound_token_lists_and_deletes_only_its_tenants_tokens(
    client: TestClient,
) -> None:
    acme = mint(client, scopes=["job"], tenant="acme-tok")
    globex = mint(client, scopes=["job"], tenant="globex-tok")

    listed = client.get(f"{BASE}/tokens", headers=bearer(acme["token"])).json()["data"]
    response = client.delete(f"{BASE}/tokens/{globex['id']}", headers=bearer(acme["token"]))

    assert {t["tenant"] for t in listed} == {"acme-tok"}
    assert response.status_code == 404
    assert client.get(f"{BASE}/jobs", headers=bearer(globex["token"])).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("POST", "/jobs", "job"),
        ("GET", "/jobs", "job.read"),
        ("GET", "/processors", "job.read"),
        ("DELETE", f"/jobs/{uuid.UUID(int=1)}", "job"),
        ("POST", f"/runs/{uuid.UUID(int=1)}/cancel", "job"),
        ("POST", f"/runs/{uuid.UUID(int=1)}/tasks/a/skip", "job"),
        ("POST", f"/runs/{uuid.UUID(int=1)}/tasks/a/confirm", "'job.task' or 'job'"),
        ("DELETE", f"/tokens/{uuid.UUID(int=1)}", "job"),
    ],
)
def test_a_missing_scope_is_403_naming_it_and_changes_nothing(
    client: TestClient, job_body: JobBody, job_count: Callable[[], int],
    method: str, path: str, *, scope: str,
) -> None:
    other = {"job": ["job.read"], "job.read": ["job.task"]}.get(scope, ["job.read"])
    token = mint(client, scopes=other)["token"]
    before = job_count()

    response = client.request(method, BASE + path, json=job_body(), headers=bearer(token))

    assert response.status_code == 403, response.text
    assert f"needs scope {scope if 'or' in scope else repr(scope)}" in response.json()["detail"]
    assert job_count() == before


def test_job_task_passes_confirm_and_reject_but_nothing_else(client: TestClient) -> None:
    tasker = mint(client, scopes=["job.task"])["token"]
    run = f"{BASE}/runs/{uuid.UUID(int=2)}"

    for action in ("confirm", "reject"):
        response = client.post(f"{run}/tasks/a/{action}", headers=bearer(tasker))
        assert response.status_code == 404, response.text  # past the scope: no such run
    assert client.get(run, headers=bearer(tasker)).status_code == 403
    assert client.post(f"{run}/confirm", headers=bearer(tasker)).status_code == 403


def test_a_tenant_bound_token_creates_in_its_tenant_only(
    client: TestClient, job_body: JobBody, job_count: Callable[[], int],
    sessions: sessionmaker[Session],
) -> None:
    acme = mint(client, scopes=["job"], tenant="acme-jobs")["token"]

    created = create_job(client, job_body(draft=True), acme)
    before = job_count()
    refused = create_job(client, job_body(draft=True, tenant="globex-jobs"), acme)

    assert created.status_code == 201, created.text
    assert created.json()["tenant"] == "acme-jobs"
    assert refused.status_code == 403
    assert "bound to tenant 'acme-jobs'" in refused.json()["detail"]
    assert job_count() == before
    with sessions() as session:
        assert session.scalar(select(Job.tenant).where(Job.id == created.json()["id"])) == \
            "acme-jobs"


def test_other_tenants_jobs_are_never_listed(client: TestClient, job_body: JobBody) -> None:
    acme = mint(client, scopes=["job.read"], tenant="acme-list")["token"]
    mine = create_job(client, job_body(draft=True, tenant="acme-list")).json()["id"]
    theirs = create_job(client, job_body(draft=True, tenant="globex-list")).json()["id"]

    listed = client.get(f"{BASE}/jobs?limit=500", headers=bearer(acme)).json()["data"]
    asked = client.get(f"{BASE}/jobs?tenant=globex-list", headers=bearer(acme))

    assert {j["tenant"] for j in listed} == {"acme-list"}
    assert mine in {j["id"] for j in listed} and theirs not in {j["id"] for j in listed}
    assert asked.status_code == 403
    assert client.get(f"{BASE}/jobs/{theirs}", headers=bearer(acme)).status_code == 404
    everyone = client.get(f"{BASE}/jobs?limit=500").json()["data"]
    assert {mine, theirs} <= {j["id"] for j in everyone}


# -- audits over every route of the OpenAPI document, so a route added later cannot
# -- forget its scope or its tenant check


def _operations(client: TestClient) -> list[tuple[str, str]]:
    paths = client.get(f"{BASE}/openapi.json").json()["paths"]
    return [(method.upper(), path) for path, item in paths.items()
            for method in item if path.startswith(BASE) and path not in UNSCOPED]


def _filled(path: str, ids: dict[str, str]) -> str:
    return path.format(**{name: ids.get(name, str(uuid.UUID(int=3))) for name in
                          ("job_id", "run_id", "task", "token_id", "subscription_id",
                           "name")}, key="type:audited")


def test_every_route_refuses_a_token_without_its_scope(client: TestClient) -> None:
    """GETs need ``job.read``; all else ``job``; task confirm/reject take ``job.task`` too."""
    by_scope = {s: mint(client, scopes=[s])["token"] for s in ("job.read", "job.task")}
    task_level = {"confirm", "reject"}
    wrong = []
    assert len(_operations(client)) >= 20
    for method, path in _operations(client):
        if (method, path) == ("POST", f"{BASE}/tokens"):
            continue  # any scope may create a narrower token (tested above)
        lacking = "job.task" if method == "GET" else "job.read"
        response = client.request(method, _filled(path, {}), json={},
                                  headers=bearer(by_scope[lacking]))
        if response.status_code != 403:
            wrong.append((method, path, lacking, response.status_code))
        if method == "POST" and "/tasks/" in path and path.rsplit("/", 1)[1] in task_level:
            response = client.post(_filled(path, {}), headers=bearer(by_scope["job.task"]))
            if response.status_code == 403:
                wrong.append((method, path, "job.task refused", 403))
    assert wrong == []


@pytest.fixture(scope="module")
def foreign(client: TestClient) -> dict[str, str]:
    """A job and run of tenant ``victim``, and an all-scopes token of tenant ``intruder``."""
    body = {"name": "victim-job", "tenant": "victim",
            "tasks": [{"name": "a", "type": "unserved-type"}]}
    job = create_job(client, body).json()
    token = mint(client, scopes=["job"], tenant="intruder")["token"]
    return {"job_id": job["id"], "run_id": job["run_id"], "task": "a", "token": token}


def test_every_route_hides_other_tenants_objects(
    client: TestClient, foreign: dict[str, str]
) -> None:
    wrong = []
    # Not PUT /jobs/{job_id}: its path is a name in the caller's own tenant (what another
    # tenant has of that name it never reaches: test_api_job_names).
    operations = [(m, p) for m, p in _operations(client) if ("{job_id}" in p or "{run_id}" in p)
                  and (m, p) != ("PUT", f"{BASE}/jobs/{{job_id}}")]
    assert len(operations) >= 18  # jobs/{id} (5), runs/{id} (8), tasks (5)...: not vacuous
    for method, path in operations:
        body = {"name": "renamed"} if method == "PATCH" else None
        response = client.request(method, _filled(path, foreign), json=body,
                                  headers=bearer(foreign["token"]))
        if response.status_code != 404 or "not found" not in response.json()["detail"]:
            wrong.append((method, path, response.status_code))

    assert wrong == []
    owner = client.get(f"{BASE}/jobs/{foreign['job_id']}").json()
    assert owner["name"] == "victim-job"
    assert client.get(f"{BASE}/runs/{foreign['run_id']}").json()["state"] == "READY"


def test_tokens_are_listed_by_pages_without_gaps_or_repeats(client: TestClient) -> None:
    tenant = f"pages-{uuid.uuid4().hex[:6]}"
    made = {mint(client, scopes=["job.read"], tenant=tenant)["id"] for _ in range(7)}
    reader = mint(client, scopes=["job.read"], tenant=tenant)
    made.add(reader["id"])

    seen: list[str] = []
    cursor: str | None = None
    while True:
        query = f"?limit=3&cursor={cursor}" if cursor else "?limit=3"
        page = client.get(f"{BASE}/tokens{query}", headers=bearer(reader["token"])).json()
        assert len(page["data"]) <= 3
        seen += [t["id"] for t in page["data"]]
        if page["data"] and not cursor:
            mint(client, scopes=["job.read"], tenant=tenant)  # newer: not on later pages
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert len(seen) == len(set(seen)) and set(seen) == made
    bad = client.get(f"{BASE}/tokens?cursor=nonsense")
    assert bad.status_code == 422 and "cursor" in bad.json()["detail"]
