"""Reading runs over REST: shape and order, journal, and task logs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import JournalEntry, TaskLog, TaskRun

JobBody = Callable[..., dict[str, Any]]


@pytest.fixture
def job(client: TestClient, job_body: JobBody) -> dict[str, Any]:
    """A one-off job whose tasks are defined in the order c, a, b (a → b, c alone)."""
    body = job_body(tasks=[
        {"name": "c", "type": "shell", "params": {"argv": ["true"]}},
        {"name": "a", "type": "noop", "next": ["b"]},
        {"name": "b", "type": "sleep", "params": {"seconds": 1}},
    ])
    response = client.post("/api/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_a_run_lists_its_tasks_in_job_order_with_progress(
    client: TestClient, job: dict[str, Any], sessions: sessionmaker[Session],
) -> None:
    with sessions.begin() as session:
        session.execute(update(TaskRun).where(TaskRun.run_id == job["run_id"], TaskRun.name == "c")
                        .values(state="COMPLETED", output={"rc": 0}, worker="w1"))

    response = client.get(f"/api/v1/runs/{job['run_id']}")

    assert response.status_code == 200
    run = response.json()
    assert {k: run[k] for k in ("id", "job_id", "number", "trigger", "state")} == {
        "id": job["run_id"], "job_id": job["id"], "number": 1, "trigger": "submit",
        "state": "READY"}
    assert run["progress"] == {"WAITING": 2, "COMPLETED": 1}
    assert [t["name"] for t in run["tasks"]] == ["c", "a", "b"]
    assert set(run["tasks"][0]) == {"id", "name", "type", "state", "attempt", "worker", "output",
                                    "message", "started_at", "finished_at", "waiting_for"}
    assert (run["tasks"][0]["output"], run["tasks"][0]["worker"]) == ({"rc": 0}, "w1")
    assert datetime.fromisoformat(run["scheduled_for"]) <= datetime.now(UTC)
    assert (run["started_at"], run["finished_at"]) == (None, None)


def test_the_journal_records_the_creation(client: TestClient, job: dict[str, Any]) -> None:
    again = client.post(f"/api/v1/jobs/{job['id']}/runs").json()

    first = client.get(f"/api/v1/runs/{job['run_id']}/journal").json()["entries"]
    second = client.get(f"/api/v1/runs/{again['id']}/journal").json()["entries"]

    assert [(e["task"], e["attempt"], e["from"], e["to"], e["reason"], e["actor"])
            for e in first] == [(None, None, "", "READY", "created", "submit")]
    assert second[0]["actor"] == "api"
    assert datetime.fromisoformat(first[0]["at"]).tzinfo is not None


def _add_journal(sessions: sessionmaker[Session], run_id: str, count: int) -> None:
    """``count`` entries after the creation's, for tasks a and b in turn."""
    start = datetime(2030, 5, 1, tzinfo=UTC)
    with sessions.begin() as session:
        session.add_all(
            JournalEntry(run_id=run_id, task="ab"[i % 2], attempt=0,
                         at=start + timedelta(seconds=i), from_state="WAITING",
                         to_state="READY", reason=f"entry {i}", actor="engine")
            for i in range(count))


def _pages(client: TestClient, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of a journal, following ``next_cursor``."""
    pages = []
    while True:
        response = client.get(path, params=params)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        if pages[-1]["next_cursor"] is None:
            return pages
        params["cursor"] = pages[-1]["next_cursor"]


def test_the_journal_comes_in_pages_and_by_task(
    client: TestClient, job: dict[str, Any], sessions: sessionmaker[Session],
) -> None:
    _add_journal(sessions, job["run_id"], 25)
    path = f"/api/v1/runs/{job['run_id']}/journal"

    whole = client.get(path).json()
    pages = _pages(client, path, limit=10)
    of_b = _pages(client, path, task="b", limit=5)

    assert whole["next_cursor"] is None
    assert [e["reason"] for e in whole["entries"]] == ["created"] + [
        f"entry {i}" for i in range(25)]
    assert [len(p["entries"]) for p in pages] == [10, 10, 6]
    assert [e for p in pages for e in p["entries"]] == whole["entries"]
    assert [len(p["entries"]) for p in of_b] == [5, 5, 2]
    assert [e["reason"] for p in of_b for e in p["entries"]] == [
        f"entry {i}" for i in range(1, 25, 2)]
    assert client.get(path, params={"task": "nowhere"}).json() == {
        "entries": [], "next_cursor": None}


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 0}, "limit"), ({"limit": 5001}, "limit"), ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
    ({"cursor": "W10"}, "cursor"), ({"task": "x" * 201}, "task"),
])
def test_a_bad_journal_page_is_a_422_naming_the_parameter(
    client: TestClient, job: dict[str, Any], params: dict[str, Any], field: str,
) -> None:
    response = client.get(f"/api/v1/runs/{job['run_id']}/journal", params=params)

    assert response.status_code == 422, response.text
    assert field in response.text


def _add_logs(sessions: sessionmaker[Session], run_id: str, task: str) -> str:
    start = datetime(2030, 5, 1, tzinfo=UTC)
    with sessions.begin() as session:
        task_run = session.scalars(
            select(TaskRun).where(TaskRun.run_id == run_id, TaskRun.name == task)).one()
        lines = [(0, "stdout", "first try"), (0, "stderr", "it broke"), (1, "stdout", "again"),
                 (1, "stdout", "done")]
        session.add_all(
            TaskLog(task_run_id=task_run.id, attempt=a, at=start + timedelta(seconds=i),
                    stream=stream, line=line)
            for i, (a, stream, line) in enumerate(lines)
        )
        return str(task_run.id)


def test_task_logs_by_name_or_id_as_json_or_text(
    client: TestClient, job: dict[str, Any], sessions: sessionmaker[Session],
) -> None:
    task_run_id = _add_logs(sessions, job["run_id"], "a")
    base = f"/api/v1/runs/{job['run_id']}/tasks"

    by_name = client.get(f"{base}/a/logs").json()
    by_id = client.get(f"{base}/{task_run_id}/logs").json()
    second = client.get(f"{base}/a/logs", params={"attempt": 1}).json()
    text = client.get(f"{base}/a/logs", headers={"Accept": "text/plain"})
    other = client.get(f"{base}/b/logs").json()

    assert by_name == by_id
    assert [(x["attempt"], x["stream"], x["line"]) for x in by_name["lines"]] == [
        (0, "stdout", "first try"), (0, "stderr", "it broke"), (1, "stdout", "again"),
        (1, "stdout", "done")]
    assert by_name["lines"][0]["at"].startswith("2030-05-01T00:00:00")
    assert [x["line"] for x in second["lines"]] == ["again", "done"]
    assert text.headers["content-type"].startswith("text/plain")
    assert text.text == "first try\nit broke\nagain\ndone\n"
    assert other == {"lines": []}


def test_logs_of_an_unknown_task_name_the_task(client: TestClient, job: dict[str, Any]) -> None:
    response = client.get(f"/api/v1/runs/{job['run_id']}/tasks/ghost/logs")

    assert response.status_code == 404
    assert "'ghost'" in response.json()["detail"]
    assert str(uuid.UUID(job["run_id"])) in response.json()["detail"]


def test_an_unchanged_run_is_a_304_and_a_changed_one_is_read_again(
    client: TestClient, job: dict[str, Any],
) -> None:
    """Issue 18: pollers send the ETag back; the cancel below goes through the engine's
    writer, as every change of a run does, and so moves the tag."""
    url = f"/api/v1/runs/{job['run_id']}"
    first = client.get(url)
    tag = first.headers["etag"]

    unchanged = client.get(url, headers={"If-None-Match": tag})
    assert (unchanged.status_code, unchanged.content) == (304, b"")
    assert unchanged.headers["etag"] == tag
    assert client.get(url, headers={"If-None-Match": f'W/"0.0.0", {tag}'}).status_code == 304
    assert client.get(url, headers={"If-None-Match": tag.removeprefix("W/")}).status_code == 304
    assert client.get(url, headers={"If-None-Match": "*"}).status_code == 304
    assert client.get(url, headers={"If-None-Match": 'W/"0.0.0"'}).status_code == 200
    assert client.post(f"{url}/cancel").status_code == 200

    changed = client.get(url, headers={"If-None-Match": tag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != tag
    assert changed.json()["state"] == "CANCELED"
    assert changed.json() == {**first.json(), **{k: changed.json()[k] for k in (
        "state", "finished_at", "progress", "tasks")}}


def test_a_conditional_read_of_another_tenant_s_run_is_still_a_404(
    client: TestClient, job: dict[str, Any],
) -> None:
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    token = client.post("/api/v1/tokens", json={
        "name": tenant, "scopes": ["job"], "tenant": tenant}).json()
    url = f"/api/v1/runs/{job['run_id']}"
    tag = client.get(url).headers["etag"]
    try:
        foreign = client.get(url, headers={"Authorization": f"Bearer {token['token']}",
                                           "If-None-Match": tag})
        assert foreign.status_code == 404, foreign.text
        assert client.get(f"/api/v1/runs/{uuid.uuid4()}",
                          headers={"If-None-Match": "*"}).status_code == 404
    finally:
        client.delete(f"/api/v1/tokens/{token['id']}")
