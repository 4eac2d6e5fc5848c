"""``GET /jobs`` writes its rows straight as JSON: it must be ``JobsPublic``'s shape, and
show of each job what ``GET /jobs/{id}`` shows."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from scheduler.api.schemas import (
    JobsPublic,
    JobSummaryPublic,
    ListedRunsPublic,
    RunsPublic,
    RunSummaryPublic,
)

_TASKS = [{"name": "a", "type": "noop"}]


def _kinds(label: str) -> list[dict[str, Any]]:
    """A draft, a one-off job (it has a run), cron jobs enabled and not, a dated one."""
    base = {"labels": {"list-body": label, "team": "ops"}, "tasks": _TASKS}
    return [
        {**base, "name": f"draft-{label}", "draft": True},
        {**base, "name": f"once-{label}"},
        {**base, "name": f"cron-{label}", "schedule": {"cron": "*/5 * * * *",
                                                       "timezone": "Europe/Berlin"}},
        {**base, "name": f"off-{label}", "enabled": False,
         "schedule": {"cron": "0 3 * * *"}},
        {**base, "name": f"at-{label}", "schedule": {"at": "2031-05-06T07:08:09Z"}},
    ]


def test_the_list_is_the_models_shape_and_shows_what_a_read_shows(client: TestClient) -> None:
    label = uuid.uuid4().hex
    for spec in _kinds(label):
        assert client.post("/api/v1/jobs", json=spec).status_code == 201
    response = client.get("/api/v1/jobs", params={"label": f"list-body={label}", "limit": 3})
    assert response.status_code == 200
    first = response.json()
    second = client.get("/api/v1/jobs", params={
        "label": f"list-body={label}", "cursor": first["next_cursor"]}).json()
    assert second["next_cursor"] is None
    for page in (first, second):
        # Every field there, each as the model writes it: read back, it is unchanged.
        assert JobsPublic.model_validate(page).model_dump(mode="json") == page
    listed = first["data"] + second["data"]
    assert {job["state"] for job in listed} == {"NEW", "READY", "SCHEDULED", "DISABLED"}
    for job in listed:
        read = client.get(f"/api/v1/jobs/{job['id']}").json()
        assert job == {name: read[name] for name in JobSummaryPublic.model_fields}


def test_the_runs_lists_are_the_models_shape_and_show_what_a_read_shows(
    client: TestClient,
) -> None:
    label = uuid.uuid4().hex
    job = client.post("/api/v1/jobs", json={
        "name": f"runs-{label}", "draft": True, "labels": {"list-body": label},
        "tasks": [{"name": "a", "type": "noop", "next": ["b"]}, {"name": "b", "type": "noop"}],
    }).json()
    assert client.post(f"/api/v1/jobs/{job['id']}/commit").status_code == 200
    for _ in range(2):
        assert client.post(f"/api/v1/jobs/{job['id']}/runs").status_code == 201
    own = client.get(f"/api/v1/jobs/{job['id']}/runs", params={"limit": 2}).json()
    rest = client.get(f"/api/v1/jobs/{job['id']}/runs",
                      params={"cursor": own["next_cursor"]}).json()
    assert [run["number"] for run in own["data"] + rest["data"]] == [3, 2, 1]
    across = client.get("/api/v1/runs", params={"limit": 500}).json()
    listed = [run for run in across["data"] if run["job_id"] == job["id"]]
    assert [run["number"] for run in listed] == [3, 2, 1]
    for page in (own, rest):
        assert RunsPublic.model_validate(page).model_dump(mode="json") == page
    assert ListedRunsPublic.model_validate(across).model_dump(mode="json") == across
    for run, listed_run in zip(own["data"] + rest["data"], listed, strict=True):
        read = client.get(f"/api/v1/runs/{run['id']}").json()
        assert sum(run["progress"].values()) == 2  # its two tasks, counted by state
        assert run == {name: read[name] for name in RunSummaryPublic.model_fields}
        assert listed_run == {**run, "job_name": f"runs-{label}", "tenant": ""}
