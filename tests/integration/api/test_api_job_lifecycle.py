"""Drafts and commit, PATCH, DELETE over REST, without an engine (runs stay READY)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx2
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import Job, JobStorage, JournalEntry, Run, Task, TaskRun

JOBS = "/api/v1/jobs"
JobBody = Callable[..., dict[str, Any]]
Queued = Callable[[str], list[dict[str, Any]]]
Recorded = Callable[[], list[dict[str, Any]]]
CRON = {"cron": "0 10 * * *", "timezone": "Europe/Berlin"}
CRON_ZONE = ZoneInfo("Europe/Berlin")


def _created(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(JOBS, json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def _job_row(sessions: sessionmaker[Session], job_id: str) -> Job | None:
    with sessions() as session:
        return session.get(Job, uuid.UUID(job_id))


def _problem(response: httpx2.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    for word in words:
        assert word in response.json()["detail"], response.json()


def _count(sessions: sessionmaker[Session], model: type[Any], *where: Any) -> int:
    with sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def test_a_draft_is_new_until_commit_gives_it_its_run(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session], queued: Queued,
) -> None:
    draft = _created(client, job_body(name="draft-one-off", draft=True))
    assert (draft["state"], draft["draft"], draft["run_id"]) == ("NEW", True, None)

    committed = client.post(f"{JOBS}/{draft['id']}/commit")

    assert committed.status_code == 200, committed.text
    job = committed.json()
    assert (job["state"], job["draft"], job["version"]) == ("READY", False, 1)
    assert job["run_id"] is not None
    activations = [m["payload"]["run_id"] for m in queued("stellwerk.activation")]
    assert job["run_id"] in activations
    again = client.post(f"{JOBS}/{draft['id']}/commit")
    _problem(again, 409, "READY", "committed")
    assert _count(sessions, Run, Run.job_id == uuid.UUID(draft["id"])) == 1


def test_committing_a_cron_draft_schedules_its_next_fire(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    draft = _created(client, job_body(name="draft-cron", draft=True, schedule=CRON))
    row = _job_row(sessions, draft["id"])
    assert row is not None and row.next_fire_at is None
    before = datetime.now(UTC)

    job = client.post(f"{JOBS}/{draft['id']}/commit").json()

    assert (job["state"], job["run_id"]) == ("SCHEDULED", None)
    row = _job_row(sessions, draft["id"])
    assert row is not None and row.next_fire_at is not None
    assert row.next_fire_at > before
    assert row.next_fire_at.astimezone(CRON_ZONE).hour == 10
    _problem(client.post(f"{JOBS}/{draft['id']}/commit"), 409, "SCHEDULED")


def test_commit_of_an_unknown_job_is_404(client: TestClient) -> None:
    _problem(client.post(f"{JOBS}/{uuid.uuid4()}/commit"), 404, "not found")


def test_patch_changes_the_definition_and_a_new_run_uses_it(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    job = _created(client, job_body(name="patched", secure_params={"k": "v"}))
    assert client.post(f"/api/v1/runs/{job['run_id']}/cancel").status_code == 200
    tasks = [{"name": "a", "type": "noop", "next": ["d"]},
             {"name": "d", "type": "sleep", "params": {"seconds": 1}}]

    response = client.patch(f"{JOBS}/{job['id']}", json={
        "name": "renamed", "labels": {"team": "ops"}, "tasks": tasks, "params": {"x": 1},
    })

    assert response.status_code == 200, response.text
    patched = response.json()
    assert (patched["name"], patched["labels"], patched["version"]) == (
        "renamed", {"team": "ops"}, 2)
    assert [(t["name"], t["next"]) for t in patched["tasks"]] == [("a", ["d"]), ("d", [])]
    assert patched["application"] == "tests" and patched["params"] == {"x": 1}
    assert patched["tasks"][0]["id"] == job["tasks"][0]["id"]  # "a" keeps its id
    run = client.post(f"{JOBS}/{job['id']}/runs").json()
    assert [t["name"] for t in run["tasks"]] == ["a", "d"]
    old_run = client.get(f"/api/v1/runs/{job['run_id']}").json()
    assert [t["name"] for t in old_run["tasks"]] == ["a"]  # b and c left the graph
    row = _job_row(sessions, job["id"])
    assert row is not None and row.secure_params is not None  # not given: kept


def test_patching_task_defaults_reaches_tasks_that_did_not_set_their_own(
    client: TestClient, job_body: JobBody,
) -> None:
    job = _created(client, job_body(name="defaults", draft=True))

    patched = client.patch(f"{JOBS}/{job['id']}", json={"task_defaults": {"retries": 5}})

    assert patched.status_code == 200, patched.text
    retries = {t["name"]: t["retries"] for t in patched.json()["tasks"]}
    assert retries == {"a": 5, "b": 2, "c": 5}  # b set its own


def test_a_definition_change_under_an_unfinished_run_is_409_and_changes_nothing(
    client: TestClient, job_body: JobBody,
) -> None:
    job = _created(client, job_body(name="busy"))

    refused = client.patch(f"{JOBS}/{job['id']}", json={"params": {"x": 1}, "canary": True})

    _problem(refused, 409, job["run_id"], "READY", "canary, params")
    after = client.get(f"{JOBS}/{job['id']}").json()
    assert (after["version"], after["params"], after["canary"]) == (1, {}, False)
    labels = client.patch(f"{JOBS}/{job['id']}", json={"labels": {"a": "b"}})
    assert labels.status_code == 200, labels.text
    assert (labels.json()["labels"], labels.json()["version"]) == ({"a": "b"}, 2)


def test_bad_patches_are_422_naming_the_field_or_task_and_change_nothing(
    client: TestClient, job_body: JobBody,
) -> None:
    job = _created(client, job_body(name="strict", draft=True))
    url = f"{JOBS}/{job['id']}"
    cycle = [{"name": "x", "type": "noop", "next": ["y"]},
             {"name": "y", "type": "noop", "next": ["x"]}]

    _problem(client.patch(url, json={"tasks": cycle}), 422, "cycle")
    _problem(client.patch(url, json={"tasks": [{"name": "x", "type": "no op"}]}), 422,
             "tasks[0].type (task 'x')")
    _problem(client.patch(url, json={"name": None}), 422, "name")
    _problem(client.patch(url, json={"failure_threshold": 2}), 422, "failure_threshold")
    _problem(client.patch(url, json={"tenant": "other"}), 422, "tenant")
    _problem(client.patch(url, json={"schedule": {"cron": "61 * * * *"}}), 422, "schedule.cron")
    _problem(client.patch(url, json={"tasks": []}), 422, "tasks")
    assert client.get(url).json() == job


def test_patch_of_an_unknown_job_is_404_and_a_non_json_body_415(client: TestClient) -> None:
    _problem(client.patch(f"{JOBS}/{uuid.uuid4()}", json={"name": "x"}), 404, "not found")
    response = client.patch(f"{JOBS}/{uuid.uuid4()}", content=b"name=x",
                            headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


def test_a_committed_one_off_job_cannot_become_a_cron_job(
    client: TestClient, job_body: JobBody,
) -> None:
    job = _created(client, job_body(name="one-off"))

    _problem(client.patch(f"{JOBS}/{job['id']}", json={"schedule": CRON}), 409, "committed")

    assert client.get(f"{JOBS}/{job['id']}").json()["version"] == 1


def test_disabling_a_cron_job_stops_its_fires_and_enabling_reschedules_it(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    job = _created(client, job_body(name="cron", schedule=CRON))
    row = _job_row(sessions, job["id"])
    assert row is not None and row.next_fire_at is not None

    disabled = client.patch(f"{JOBS}/{job['id']}", json={"enabled": False}).json()

    assert (disabled["enabled"], disabled["version"]) == (False, 2)
    row = _job_row(sessions, job["id"])
    assert row is not None and row.next_fire_at is None
    before = datetime.now(UTC)
    enabled = client.patch(f"{JOBS}/{job['id']}", json={"enabled": True}).json()
    assert (enabled["enabled"], enabled["version"]) == (True, 3)
    row = _job_row(sessions, job["id"])
    assert row is not None and row.next_fire_at is not None and row.next_fire_at > before
    hourly = client.patch(f"{JOBS}/{job['id']}", json={"schedule": {"cron": "0 * * * *"}})
    assert hourly.status_code == 200, hourly.text
    row = _job_row(sessions, job["id"])
    assert row is not None and row.next_fire_at is not None
    assert (row.next_fire_at - before).total_seconds() <= 3600


def test_delete_is_409_while_a_run_is_unfinished(
    client: TestClient, job_body: JobBody, job_count: Callable[[], int],
) -> None:
    job = _created(client, job_body(name="to-keep"))
    count = job_count()

    refused = client.delete(f"{JOBS}/{job['id']}")

    _problem(refused, 409, job["run_id"], "READY", "force=true")
    assert job_count() == count
    assert client.get(f"{JOBS}/{job['id']}").status_code == 200


def test_forced_delete_cancels_the_runs_and_deletes_everything(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
    job_count: Callable[[], int], recorded: Recorded,
) -> None:
    job = _created(client, job_body(name="to-delete", storage={"k": 1}))
    second = client.post(f"{JOBS}/{job['id']}/runs").json()
    run_ids = [uuid.UUID(job["run_id"]), uuid.UUID(second["id"])]
    count = job_count()

    response = client.delete(f"{JOBS}/{job['id']}", params={"force": "true"})

    assert response.status_code == 204, response.text
    assert response.content == b""
    assert job_count() == count - 1
    events = recorded()
    canceled = {e["run_id"] for e in events if e["event"] == "run.canceled"}
    assert {str(run_id) for run_id in run_ids} <= canceled
    deleted = {"event": "job.deleted", "job_id": job["id"], "job_name": "to-delete",
               "request_id": None}
    assert deleted.items() <= events[0].items()  # the newest: after the cancels
    job_id = uuid.UUID(job["id"])
    assert _count(sessions, Run, Run.job_id == job_id) == 0
    assert _count(sessions, TaskRun, TaskRun.run_id.in_(run_ids)) == 0
    assert _count(sessions, JournalEntry, JournalEntry.run_id.in_(run_ids)) == 0
    assert _count(sessions, Task, Task.job_id == job_id) == 0
    assert _count(sessions, JobStorage, JobStorage.job_id == job_id) == 0
    _problem(client.get(f"{JOBS}/{job['id']}"), 404, "not found")
    _problem(client.get(f"{JOBS}/{job['id']}/runs"), 404, "not found")
    _problem(client.delete(f"{JOBS}/{job['id']}"), 404, "not found")


def test_a_job_whose_runs_are_finished_is_deleted_without_force(
    client: TestClient, job_body: JobBody, job_count: Callable[[], int],
) -> None:
    job = _created(client, job_body(name="finished"))
    assert client.post(f"/api/v1/runs/{job['run_id']}/cancel").status_code == 200
    draft = _created(client, job_body(name="never-committed", draft=True))
    count = job_count()

    assert client.delete(f"{JOBS}/{job['id']}").status_code == 204
    assert client.delete(f"{JOBS}/{draft['id']}").status_code == 204

    assert job_count() == count - 2
    assert client.get(f"{JOBS}/{draft['id']}").status_code == 404


def test_a_run_made_before_the_graph_changed_cannot_be_retried(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    job = _created(client, job_body(name="graph-changes"))
    assert client.post(f"/api/v1/runs/{job['run_id']}/cancel").status_code == 200
    tasks = [*job_body()["tasks"], {"name": "z", "type": "noop"}]
    assert client.patch(f"{JOBS}/{job['id']}", json={"tasks": tasks}).status_code == 200
    before = client.get(f"/api/v1/runs/{job['run_id']}").json()

    retry = client.post(f"/api/v1/runs/{job['run_id']}/retry")

    _problem(retry, 409, "changed", "new run")
    assert client.get(f"/api/v1/runs/{job['run_id']}").json() == before
