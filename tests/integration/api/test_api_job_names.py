"""Jobs by name and jobs as code (issue 17): a name names one job of its tenant, every
job route takes it, and ``PUT /jobs/{name}`` makes the job what a spec says.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.spec import JobSpec
from scheduler.services.jobs import create_job
from tests.integration.api.conftest import JobBody, wait_for_a_lock_wait

API = "/api/v1"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def tenant_headers(client: TestClient) -> dict[str, str]:
    """A ``job`` token bound to a tenant of its own."""
    tenant = unique("team")
    token = client.post(f"{API}/tokens", json={"name": tenant, "scopes": ["job"],
                                               "tenant": tenant}).json()
    return {"Authorization": f"Bearer {token['token']}"}


def draft(job_body: JobBody, name: str, **more: Any) -> dict[str, Any]:
    """A draft (nothing runs) of the three-task job, named ``name``."""
    return job_body(name=name, draft=True, **more)


def test_every_job_route_takes_the_name(client: TestClient, job_body: JobBody) -> None:
    name = unique("nightly")
    job = client.post(f"{API}/jobs", json=draft(job_body, name)).json()
    assert client.get(f"{API}/jobs/{name}").json()["id"] == job["id"]
    patched = client.patch(f"{API}/jobs/{name}", json={"description": "by name"})
    assert patched.status_code == 200, patched.text
    assert client.post(f"{API}/jobs/{name}/commit").status_code == 200
    run = client.post(f"{API}/jobs/{name}/runs")
    assert run.status_code == 201, run.text
    assert client.get(f"{API}/jobs/{name}/runs").json()["data"][0]["id"] == run.json()["id"]
    assert client.delete(f"{API}/jobs/{name}", params={"force": True}).status_code == 204
    missing = client.get(f"{API}/jobs/{name}")
    assert missing.status_code == 404 and repr(name) in missing.json()["detail"]


def test_a_second_job_of_a_name_is_a_conflict_naming_the_first(
    client: TestClient, job_body: JobBody, job_count: Any,
) -> None:
    name = unique("report")
    first = client.post(f"{API}/jobs", json=draft(job_body, name)).json()
    before = job_count()
    again = client.post(f"{API}/jobs", json=draft(job_body, name))
    assert again.status_code == 409
    assert name in again.json()["detail"] and first["id"] in again.json()["detail"]
    assert "stellwerk apply" in again.json()["detail"]
    assert job_count() == before
    other = client.post(f"{API}/jobs", json=draft(job_body, unique("other"))).json()
    renamed = client.patch(f"{API}/jobs/{other['id']}", json={"name": name})
    assert renamed.status_code == 409 and first["id"] in renamed.json()["detail"]


def test_two_creates_of_one_name_at_once_are_one_job_and_a_conflict(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
    api_settings: Settings,
) -> None:
    """The name is checked by the insert: a create that meets another create's job of
    its name, not yet committed, waits for it and then answers 409 naming it (a check
    read before the insert missed it, and the insert's unique violation was a 500)."""
    name = unique("race")
    with sessions() as first, ThreadPoolExecutor(1) as pool:
        created = create_job(first, JobSpec.model_validate(draft(job_body, name)),
                             datetime.now(UTC))
        second = pool.submit(client.post, f"{API}/jobs", json=draft(job_body, name))
        wait_for_a_lock_wait(api_settings)
        first.commit()
        answer = second.result(timeout=30)
    assert answer.status_code == 409, answer.text
    assert str(created.job_id) in answer.json()["detail"]


def test_a_rename_to_a_name_being_created_is_a_conflict(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
    api_settings: Settings,
) -> None:
    """The same race for a change of name: the rename waits for the create and is a 409
    naming its job, and keeps its own name."""
    name, other = unique("race"), client.post(
        f"{API}/jobs", json=draft(job_body, unique("renamed"))).json()
    with sessions() as first, ThreadPoolExecutor(1) as pool:
        created = create_job(first, JobSpec.model_validate(draft(job_body, name)),
                             datetime.now(UTC))
        second = pool.submit(client.patch, f"{API}/jobs/{other['id']}", json={"name": name})
        wait_for_a_lock_wait(api_settings)
        first.commit()
        answer = second.result(timeout=30)
    assert answer.status_code == 409, answer.text
    assert str(created.job_id) in answer.json()["detail"]
    assert client.get(f"{API}/jobs/{other['id']}").json()["name"] == other["name"]


def test_tenants_each_have_their_name_and_an_unbound_token_is_told_to_use_the_id(
    client: TestClient, job_body: JobBody, tenant_headers: dict[str, str],
) -> None:
    name = unique("sync")
    shared = client.post(f"{API}/jobs", json=draft(job_body, name)).json()
    own = client.post(f"{API}/jobs", json=draft(job_body, name), headers=tenant_headers)
    assert own.status_code == 201, own.text
    assert client.get(f"{API}/jobs/{name}", headers=tenant_headers).json()["id"] == (
        own.json()["id"])
    both = client.get(f"{API}/jobs/{name}")
    assert both.status_code == 409 and "by its id" in both.json()["detail"]
    assert client.get(f"{API}/jobs/{shared['id']}").status_code == 200
    assert client.get(f"{API}/jobs/{shared['id']}", headers=tenant_headers).status_code == 404


def test_applying_a_spec_creates_then_changes_nothing_then_what_differs(
    client: TestClient, job_body: JobBody,
) -> None:
    name = unique("as-code")
    spec = draft(job_body, name, labels={"team": "ops"})
    created = client.put(f"{API}/jobs/{name}", json=spec)
    assert created.status_code == 201, created.text
    assert created.json()["action"] == "created"
    assert {"tasks.a", "tasks.b", "tasks.c", "labels"} <= {
        c["path"] for c in created.json()["changes"]}
    version = created.json()["job"]["version"]

    same = client.put(f"{API}/jobs/{name}", json=spec).json()
    assert (same["action"], same["changes"], same["job"]["version"]) == (
        "unchanged", [], version)

    spec["tasks"][1]["retries"] = 5
    spec["schedule"] = {"cron": "30 2 * * *"}
    looked = client.put(f"{API}/jobs/{name}", json=spec, params={"dry_run": True}).json()
    assert looked["dry_run"] and looked["action"] == "updated"
    assert client.get(f"{API}/jobs/{name}").json()["version"] == version
    changed = client.put(f"{API}/jobs/{name}", json=spec).json()
    assert changed["changes"] == looked["changes"]
    assert {c["path"]: (c["before"], c["after"]) for c in changed["changes"]}[
        "tasks.b.retries"] == (2, 5)
    assert changed["job"]["version"] == version + 1
    assert changed["job"]["schedule"]["cron"] == "30 2 * * *"


def test_a_spec_without_secrets_keeps_them_and_a_change_of_them_shows_none(
    client: TestClient, job_body: JobBody,
) -> None:
    name = unique("sealed")
    spec = draft(job_body, name, secure_params={"password": "hunter2"})
    assert client.put(f"{API}/jobs/{name}", json=spec).status_code == 201
    del spec["secure_params"]
    assert client.put(f"{API}/jobs/{name}", json=spec).json()["action"] == "unchanged"
    spec["secure_params"] = {"password": "correct horse"}
    changed = client.put(f"{API}/jobs/{name}", json=spec)
    assert changed.json()["changes"] == [
        {"path": "secure_params", "before": "(sealed)", "after": "(sealed)"}]
    assert "hunter2" not in changed.text and "correct horse" not in changed.text


def test_bad_applies_are_refused_and_change_nothing(
    client: TestClient, job_body: JobBody,
) -> None:
    name = unique("strict")
    spec = draft(job_body, name)
    mismatch = client.put(f"{API}/jobs/other-name", json=spec)
    assert mismatch.status_code == 422 and "name" in mismatch.text
    client.put(f"{API}/jobs/{name}", json=spec)
    moved = client.put(f"{API}/jobs/{name}", json={**spec, "application": "elsewhere"})
    assert moved.status_code == 409 and "application" in moved.json()["detail"]
    assert client.get(f"{API}/jobs/{name}").json()["application"] == spec["application"]


def test_a_cron_job_between_runs_shows_what_it_waits_for_not_how_it_last_ended(
    client: TestClient, job_body: JobBody,
) -> None:
    """Issue 17: after its run ended, a cron job is SCHEDULED again (DISABLED when it is)."""
    name = unique("hourly")
    job = client.post(f"{API}/jobs", json=job_body(name=name, schedule={"cron": "0 * * * *"}))
    assert job.json()["state"] == "SCHEDULED"
    run = client.post(f"{API}/jobs/{name}/runs").json()
    assert client.get(f"{API}/jobs/{name}").json()["state"] == "READY"
    assert client.post(f"{API}/runs/{run['id']}/cancel").json()["state"] == "CANCELED"
    assert client.get(f"{API}/jobs/{name}").json()["state"] == "SCHEDULED"
    client.patch(f"{API}/jobs/{name}", json={"enabled": False})
    assert client.get(f"{API}/jobs/{name}").json()["state"] == "DISABLED"
    listed = client.get(f"{API}/jobs", params={"state": "DISABLED", "name": name}).json()
    assert [j["name"] for j in listed["data"]] == [name]
    client.patch(f"{API}/jobs/{name}", json={"enabled": True})
    assert client.get(f"{API}/jobs/{name}").json()["state"] == "SCHEDULED"
