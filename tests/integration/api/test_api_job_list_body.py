"""``GET /jobs`` writes its rows straight as JSON: it must be ``JobsPublic``'s shape, and
show of each job what ``GET /jobs/{id}`` shows."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from scheduler.api.schemas import JobsPublic, JobSummaryPublic

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
