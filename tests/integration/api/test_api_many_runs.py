"""What operating many runs reads (issue 17): runs across jobs, a job's history as a
grid, the jobs list's last run and next fire, and the live workers with their attempts.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from scheduler.services.pages import encode_cursor
from tests.integration.api.conftest import JobBody

API = "/api/v1"


def two_runs(client: TestClient, job_body: JobBody, **fields: Any) -> tuple[dict[str, Any], str]:
    """A job (its first run on submit) and a second run by name."""
    name = f"many-{uuid.uuid4().hex[:8]}"
    job = client.post(f"{API}/jobs", json=job_body(name=name, **fields)).json()
    second = client.post(f"{API}/jobs/{name}/runs").json()
    return job, second["id"]


def test_runs_across_jobs_come_newest_first_with_their_job_and_filters(
    client: TestClient, job_body: JobBody,
) -> None:
    job, second = two_runs(client, job_body)
    other, _ = two_runs(client, job_body)
    page = client.get(f"{API}/runs", params={"limit": 500}).json()
    ids = [run["id"] for run in page["data"]]
    assert ids.index(second) < ids.index(job["run_id"])  # newest first
    listed = next(run for run in page["data"] if run["id"] == second)
    assert (listed["job_name"], listed["trigger"], listed["state"]) == (job["name"], "api", "READY")
    assert listed["progress"] == {"WAITING": 3}  # its task runs counted by state
    submitted = client.get(f"{API}/runs", params={"trigger": "submit", "limit": 500}).json()
    assert job["run_id"] in [r["id"] for r in submitted["data"]]
    assert second not in [r["id"] for r in submitted["data"]]
    first = client.get(f"{API}/runs", params={"limit": 1}).json()
    rest = client.get(f"{API}/runs", params={"limit": 500, "cursor": first["next_cursor"]}).json()
    assert first["data"][0]["id"] not in [r["id"] for r in rest["data"]]
    assert other["run_id"] in [first["data"][0]["id"], *[r["id"] for r in rest["data"]]]


def test_a_job_s_history_is_its_tasks_by_its_runs_and_the_list_shows_the_last_run(
    client: TestClient, job_body: JobBody,
) -> None:
    job, second = two_runs(client, job_body)
    history = client.get(f"{API}/jobs/{job['name']}/history").json()
    assert history["tasks"] == ["a", "b", "c"]
    assert [run["id"] for run in history["runs"]] == [second, job["run_id"]]
    assert history["runs"][0]["tasks"] == {"a": "WAITING", "b": "WAITING", "c": "WAITING"}
    listed = client.get(f"{API}/jobs", params={"name": job["name"]}).json()["data"][0]
    assert (listed["latest_run"]["id"], listed["latest_run"]["number"]) == (second, 2)


def test_a_cron_job_says_when_it_fires_next(client: TestClient, job_body: JobBody) -> None:
    name = f"cron-{uuid.uuid4().hex[:8]}"
    client.post(f"{API}/jobs", json=job_body(name=name, schedule={"cron": "0 3 * * *"}))
    listed = client.get(f"{API}/jobs", params={"name": name}).json()["data"][0]
    assert listed["next_fire_at"] is not None and listed["latest_run"] is None


def test_workers_are_listed_and_an_unknown_job_s_history_is_404(client: TestClient) -> None:
    answer = client.get(f"{API}/workers")
    assert answer.status_code == 200 and isinstance(answer.json()["data"], list)
    assert client.get(f"{API}/jobs/{uuid.uuid4()}/history").status_code == 404


def test_a_cursor_of_a_list_that_is_no_time_and_id_is_422_naming_it(client: TestClient) -> None:
    bad = encode_cursor(["not a time", "not an id"])
    for path in ("runs", "jobs"):
        answer = client.get(f"{API}/{path}", params={"cursor": bad})
        assert answer.status_code == 422, answer.text
        assert "cursor" in answer.text


def test_a_job_s_runs_history_and_journal_are_only_its_tenant_s(
    client: TestClient, job_body: JobBody,
) -> None:
    job, second = two_runs(client, job_body)
    runs = client.get(f"{API}/jobs/{job['id']}/runs").json()
    assert [run["id"] for run in runs["data"]] == [second, job["run_id"]]
    assert runs["data"][0]["progress"] == {"WAITING": 3}
    draft = client.post(f"{API}/jobs", json=job_body(
        name=f"draft-{uuid.uuid4().hex[:8]}", draft=True)).json()
    assert client.get(f"{API}/jobs/{draft['id']}/runs").json() == {
        "data": [], "next_cursor": None}
    assert client.get(f"{API}/jobs/{uuid.uuid4()}/runs").status_code == 404
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    token = client.post(f"{API}/tokens", json={
        "name": tenant, "scopes": ["job"], "tenant": tenant}).json()
    try:
        for path in (f"jobs/{job['id']}/runs", f"jobs/{job['id']}/history",
                     f"runs/{job['run_id']}/journal"):
            foreign = client.get(f"{API}/{path}",
                                 headers={"Authorization": f"Bearer {token['token']}"})
            assert foreign.status_code == 404, (path, foreign.text)
            assert client.get(f"{API}/{path}").status_code == 200
    finally:
        client.delete(f"{API}/tokens/{token['id']}")
