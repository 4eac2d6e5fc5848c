"""Creating and reading jobs over REST: runs created, messages published, pages complete."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import Job, JobStorage, Run, Task, TaskEdge, TaskRun

JOBS = "/api/v1/jobs"
JobBody = Callable[..., dict[str, Any]]
Queued = Callable[[str], list[dict[str, Any]]]
Recorded = Callable[[], list[dict[str, Any]]]


def _run(sessions: sessionmaker[Session], run_id: str) -> Run:
    with sessions() as session:
        run = session.get(Run, uuid.UUID(run_id))
        assert run is not None
        return run


def test_one_off_job_gets_a_ready_run_and_its_activation_is_published(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
    rds: redis.Redis, queued: Queued, *, recorded: Recorded,
) -> None:
    before = rds.llen("stellwerk.activation")

    response = client.post(JOBS, json=job_body(storage={"last": 1}))

    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "READY"
    assert [t["name"] for t in job["tasks"]] == ["a", "b", "c"]
    assert all(uuid.UUID(t["id"]) for t in job["tasks"])
    assert job["storage"] == {"last": 1}
    run = _run(sessions, job["run_id"])
    assert (run.state, run.number, run.trigger) == ("READY", 1, "submit")
    assert run.activation_sent_at is not None
    assert rds.llen("stellwerk.activation") == before + 1
    newest = queued("stellwerk.activation")[0]
    assert newest["task"] == "stellwerk.activate"
    assert newest["payload"]["run_id"] == job["run_id"]
    assert newest["id"] == newest["payload"]["message_id"]
    events = recorded()
    # Newest first: job.created (written last, to name the run), then run.scheduled.
    created = {"event": "job.created", "job_id": job["id"], "run_id": job["run_id"],
               "state": "READY", "request_id": None}
    assert created.items() <= events[0].items()
    assert {"event": "run.scheduled", "run_id": job["run_id"]}.items() <= events[1].items()


def test_the_job_rows_hold_the_graph_and_effective_settings(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    body = job_body(
        task_defaults={"timeout": 300, "retries": 1, "retry_backoff": 5}, priority=7,
        secure_params={"password": "hunter2"}, storage={"k": "v"},
    )
    job = client.post(JOBS, json=body).json()

    with sessions() as session:
        row = session.get(Job, uuid.UUID(job["id"]))
        assert row is not None
        tasks = session.scalars(select(Task).where(Task.job_id == row.id).order_by(Task.position))
        by_name = {t.name: t for t in tasks}
        edges = session.execute(select(TaskEdge.from_task, TaskEdge.to_task)
                                .where(TaskEdge.job_id == row.id)).all()
        storage = session.get(JobStorage, row.id)
        task_runs = session.scalars(select(TaskRun).where(TaskRun.run_id == job["run_id"])).all()
    assert row is not None and storage is not None
    assert "tasks" not in row.spec and "secure_params" not in row.spec
    assert "hunter2" not in (row.secure_params or "")  # sealed: see test_api_secrets.py
    assert (by_name["a"].timeout_s, by_name["a"].retries, by_name["a"].retry_backoff_s) == (
        300.0, 1, 5.0)
    assert (by_name["b"].timeout_s, by_name["b"].retries, by_name["b"].priority) == (60.0, 2, 7)
    assert set(edges) == {(by_name["a"].id, by_name["b"].id), (by_name["b"].id, by_name["c"].id)}
    assert storage.data == {"k": "v"}
    assert {(t.name, t.state, t.attempt, t.base) for t in task_runs} == {
        ("a", "WAITING", 0, 0), ("b", "WAITING", 0, 0), ("c", "WAITING", 0, 0)}
    assert "hunter2" not in json.dumps(job)
    assert "secure_params" not in client.get(f"{JOBS}/{job['id']}").json()


def test_task_params_come_back_as_written_whatever_their_characters(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    """Tasks are written with ``COPY``, whose text format escapes tabs, newlines,
    backslashes and its NULL marker ``\\N``: each must come back as it was sent."""
    awkward = {"argv": ["printf", "a\tb\nc\\d", "\\N", "", "ü €"], "none": None,
               "nested": {"k": "\r\n", "n": 1.5}}
    tasks = [{"name": "a", "type": "shell", "params": awkward, "next": ["b"]},
             {"name": "b", "type": "noop", "concurrency": [{"key": "db-\\N", "limit": 2}]}]
    job = client.post(JOBS, json=job_body(tasks=tasks, draft=True))
    assert job.status_code == 201, job.text
    with sessions() as session:
        rows = {t.name: t for t in session.scalars(
            select(Task).where(Task.job_id == uuid.UUID(job.json()["id"])))}
    assert rows["a"].params == awkward
    assert rows["a"].flow is None and rows["b"].params == {}
    assert rows["b"].flow is not None and rows["b"].flow["concurrency"] == [["key:db-\\N", 2]]
    assert client.get(f"{JOBS}/{job.json()['id']}").json()["tasks"][0]["params"] == awkward


def test_a_draft_gets_no_run_and_cannot_be_run(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    job = client.post(JOBS, json=job_body(draft=True)).json()

    assert (job["state"], job["run_id"], job["draft"]) == ("NEW", None, True)
    with sessions() as session:
        assert session.scalars(select(Run).where(Run.job_id == job["id"])).first() is None
    refused = client.post(f"{JOBS}/{job['id']}/runs")
    assert refused.status_code == 409
    assert "draft" in refused.json()["detail"]


def test_a_future_date_makes_a_ready_run_without_activation(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session], rds: redis.Redis,
) -> None:
    at = datetime.now(UTC) + timedelta(days=1)
    before = rds.llen("stellwerk.activation")

    job = client.post(JOBS, json=job_body(schedule={"at": at.isoformat()})).json()

    run = _run(sessions, job["run_id"])
    assert (run.state, run.activation_sent_at, run.scheduled_for, run.trigger) == (
        "READY", None, at, "schedule")
    assert rds.llen("stellwerk.activation") == before


def test_a_cron_job_is_scheduled_without_a_run(client: TestClient, job_body: JobBody) -> None:
    schedule = {"cron": "0 10 * * *", "timezone": "Europe/Berlin"}

    job = client.post(JOBS, json=job_body(schedule=schedule)).json()

    assert (job["state"], job["run_id"]) == ("SCHEDULED", None)
    assert job["schedule"] == {"at": None, **schedule}
    assert client.get(f"{JOBS}/{job['id']}/runs").json() == {"data": [], "next_cursor": None}


def test_get_job_returns_what_was_created(client: TestClient, job_body: JobBody) -> None:
    created = client.post(JOBS, json=job_body(labels={"team": "ops"}, canary=True)).json()

    fetched = client.get(f"{JOBS}/{created['id']}")

    assert fetched.status_code == 200
    assert fetched.json() == created
    assert (created["canary"], created["labels"]) == (True, {"team": "ops"})
    assert created["tasks"][0]["next"] == ["b"]


def _ids(client: TestClient, params: dict[str, Any]) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = client.get(JOBS, params={**params, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        pages.append([job["id"] for job in page.json()["data"]])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return pages


def test_pages_cover_every_job_once_even_when_created_at_ties(
    frozen_client: TestClient, job_body: JobBody,
) -> None:
    application = f"paging-{uuid.uuid4().hex}"
    created = {
        frozen_client.post(JOBS, json=job_body(application=application)).json()["id"]
        for _ in range(7)
    }

    pages = _ids(frozen_client, {"application": application, "limit": 3})

    assert [len(p) for p in pages] == [3, 3, 1]
    flat = [job_id for page in pages for job_id in page]
    assert sorted(flat) == sorted(created)
    assert flat == sorted(flat, reverse=True)  # same created_at: ties broken by id


def test_filters_by_type_tenant_and_labels(client: TestClient, job_body: JobBody) -> None:
    tag = uuid.uuid4().hex
    wanted = client.post(JOBS, json=job_body(
        type="nightly", tenant=tag, labels={"team": "ops", "tier": "1"})).json()
    client.post(JOBS, json=job_body(type="nightly", tenant=tag, labels={"team": "dev"}))
    client.post(JOBS, json=job_body(type="weekly", tenant=tag, labels={"team": "ops"}))

    found = client.get(JOBS, params=[("tenant", tag), ("type", "nightly"),
                                     ("label", "team=ops"), ("label", "tier=1")])

    assert [job["id"] for job in found.json()["data"]] == [wanted["id"]]
    assert "tasks" not in found.json()["data"][0]


def _bad(response: Any, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    for word in words:
        assert word in response.json()["detail"], response.json()


def test_bad_list_parameters_are_named(client: TestClient) -> None:
    _bad(client.get(JOBS, params={"label": "team"}), 422, "label", "key=value")
    _bad(client.get(JOBS, params={"cursor": "garbage!"}), 422, "cursor")
    _bad(client.get(JOBS, params={"limit": 501}), 422, "limit")
    _bad(client.get(JOBS, params={"limit": 0}), 422, "limit")


def test_run_now_creates_the_next_run_and_activates_it(
    client: TestClient, job_body: JobBody, rds: redis.Redis, queued: Queued,
) -> None:
    job = client.post(JOBS, json=job_body()).json()
    before = rds.llen("stellwerk.activation")

    response = client.post(f"{JOBS}/{job['id']}/runs")

    assert response.status_code == 201, response.text
    run = response.json()
    assert (run["number"], run["trigger"], run["state"], run["job_id"]) == (
        2, "api", "READY", job["id"])
    assert rds.llen("stellwerk.activation") == before + 1
    assert queued("stellwerk.activation")[0]["payload"]["run_id"] == run["id"]
    refreshed = client.get(f"{JOBS}/{job['id']}").json()
    assert (refreshed["run_id"], refreshed["latest_run_id"]) == (job["run_id"], run["id"])


def test_a_jobs_runs_page_newest_first(client: TestClient, job_body: JobBody) -> None:
    job = client.post(JOBS, json=job_body()).json()
    second = client.post(f"{JOBS}/{job['id']}/runs").json()
    third = client.post(f"{JOBS}/{job['id']}/runs").json()

    first_page = client.get(f"{JOBS}/{job['id']}/runs", params={"limit": 2}).json()
    rest = client.get(f"{JOBS}/{job['id']}/runs",
                      params={"limit": 2, "cursor": first_page["next_cursor"]}).json()

    assert [r["id"] for r in first_page["data"]] == [third["id"], second["id"]]
    assert [r["id"] for r in rest["data"]] == [job["run_id"]]
    assert rest["next_cursor"] is None
    assert first_page["data"][0]["progress"] == {"WAITING": 3}


def test_a_job_read_is_its_rows(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session],
) -> None:
    """``read_job`` (plain SQL, every read and write of a job) shows what the tables hold.

    On a job with a fan-out and a join, two runs, storage and a cron schedule: its
    tasks in position order with their successors, its first and latest run, storage.
    """
    from scheduler.api.schemas import JobPublic
    from scheduler.services.job_queries import read_job

    body = job_body(schedule={"cron": "*/5 * * * *"}, tasks=[
        {"name": "a", "type": "noop", "next": ["c", "b"]},
        {"name": "b", "type": "noop", "next": ["d"]},
        {"name": "c", "type": "noop", "next": ["d"], "priority": 9},
        {"name": "d", "type": "noop"},
    ])
    job_id = uuid.UUID(client.post(JOBS, json=body).json()["id"])
    for _ in range(2):
        assert client.post(f"{JOBS}/{job_id}/runs").status_code == 201
    with sessions.begin() as session:
        session.get_one(JobStorage, job_id).data = {"cursor": 42}
    with sessions() as session:
        shown = JobPublic.of_detail(read_job(session, job_id))
        job = session.get_one(Job, job_id)
        runs = session.scalars(select(Run).where(Run.job_id == job_id)
                               .order_by(Run.number)).all()
        tasks = session.scalars(select(Task).where(Task.job_id == job_id)
                                .order_by(Task.position)).all()
    assert (shown.name, shown.version, shown.schedule.model_dump(mode="json")) == (
        job.name, job.version, job.schedule)
    assert (shown.run_id, shown.latest_run and shown.latest_run.id) == (runs[0].id, runs[1].id)
    assert shown.latest_run is not None and shown.latest_run.number == 2
    assert [(t.id, t.name, t.priority) for t in shown.tasks] == [
        (t.id, t.name, t.priority) for t in tasks]
    assert [t.next for t in shown.tasks] == [["b", "c"], ["d"], ["d"], []]
    assert shown.storage == {"cursor": 42}


def test_a_write_answers_from_its_own_transaction(client: TestClient, job_body: JobBody) -> None:
    """A create, a change and a commit each show what they wrote in the transaction
    that wrote it: one transaction a request, none begun after the commit (a BEGIN
    and, at the session's close, a ROLLBACK that a read after the commit cost)."""
    engine: Engine = client.app.state.resources.sessions.kw["bind"]  # type: ignore[attr-defined]
    begun: list[object] = []

    def begin(conn: object) -> None:
        begun.append(conn)

    event.listen(engine, "begin", begin)
    try:
        created = client.post(JOBS, json=job_body(draft=True, storage={"n": 1}))
        assert created.status_code == 201, created.text
        assert (created.json()["storage"], len(begun)) == ({"n": 1}, 1)
        job_id = created.json()["id"]
        changed = client.patch(f"{JOBS}/{job_id}", json={"description": "changed"})
        assert changed.status_code == 200, changed.text
        assert (changed.json()["description"], changed.json()["version"]) == ("changed", 2)
        assert len(begun) == 2
    finally:
        event.remove(engine, "begin", begin)
