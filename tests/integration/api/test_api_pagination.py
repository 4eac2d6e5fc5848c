"""Lists page by keyset and filter by state, type, application, tenant and labels."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from fastapi.testclient import TestClient

JOBS = "/api/v1/jobs"


def _create(
    client: httpx.Client | TestClient, application: str, jobs: str = JOBS, **fields: Any,
) -> str:
    body = {"name": f"listed-{uuid.uuid4().hex[:8]}", "application": application, "draft": True,
            "tasks": [{"name": "a", "type": "noop"}], **fields}
    response = client.post(jobs, json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def _ids(client: TestClient, query: str) -> list[str]:
    response = client.get(f"{JOBS}?{query}")
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["data"]]


def _grown(items: list[str], size: int) -> Callable[[], bool]:
    return lambda: len(items) >= size


def page_while_adding(client: httpx.Client | TestClient, jobs: str = JOBS) -> None:
    """Page through an application's jobs while another thread keeps adding some.

    Every page waits for at least one insert, so the pages really interleave with the
    writes; the pages hold no job twice, every job there before is on them, and nothing
    else. Shared with the e2e test, which drives a real ``stellwerk api`` process.
    """
    application = f"paging-{uuid.uuid4()}"
    existing = {_create(client, application, jobs) for _ in range(40)}
    added: list[str] = []
    progress = threading.Condition()
    stop = threading.Event()

    def add_jobs() -> None:
        while not stop.is_set():
            job_id = _create(client, application, jobs)
            with progress:
                added.append(job_id)
                progress.notify_all()

    adder = threading.Thread(target=add_jobs)
    adder.start()
    seen: list[str] = []
    cursor: str | None = None
    try:
        while True:
            with progress:
                assert progress.wait_for(_grown(added, len(added) + 1), timeout=30)
            query = f"application={application}&limit=7" + (f"&cursor={cursor}" if cursor else "")
            page = client.get(f"{jobs}?{query}").json()
            seen += [job["id"] for job in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    finally:
        stop.set()
        adder.join()

    assert len(added) >= 6  # paging really overlapped the inserts
    assert len(seen) == len(set(seen))
    assert existing <= set(seen)
    assert set(seen) <= existing | set(added)


def test_paging_while_jobs_are_added_has_no_duplicates_and_no_gaps(client: TestClient) -> None:
    page_while_adding(client)


def test_job_filters_combine(client: TestClient) -> None:
    application = f"filters-{uuid.uuid4()}"
    backup = _create(client, application, type="backup", tenant="t1", labels={"env": "prod"})
    report = _create(client, application, type="report", tenant="t1",
                     labels={"env": "prod", "team": "bi"})
    other_tenant = _create(client, application, type="backup", tenant="t2")
    live = _create(client, application, draft=False, type="backup", tenant="t1")
    cron = _create(client, application, draft=False, schedule={"cron": "0 3 * * *"})
    base = f"application={application}"

    assert set(_ids(client, f"{base}&type=backup")) == {backup, other_tenant, live}
    assert set(_ids(client, f"{base}&tenant=t1&type=backup")) == {backup, live}
    assert set(_ids(client, f"{base}&label=env=prod")) == {backup, report}
    assert _ids(client, f"{base}&label=env=prod&label=team=bi") == [report]
    assert set(_ids(client, f"{base}&state=NEW")) == {backup, report, other_tenant}
    assert _ids(client, f"{base}&state=READY") == [live]
    assert _ids(client, f"{base}&state=SCHEDULED") == [cron]
    assert set(_ids(client, f"{base}&state=READY&state=SCHEDULED")) == {live, cron}
    assert _ids(client, f"{base}&state=ACTIVE") == []


def test_filtered_pages_follow_the_filter(client: TestClient) -> None:
    application = f"filtered-pages-{uuid.uuid4()}"
    wanted = {_create(client, application, type="wanted") for _ in range(5)}
    for _ in range(5):
        _create(client, application, type="other")

    first = client.get(f"{JOBS}?application={application}&type=wanted&limit=3").json()
    rest = client.get(
        f"{JOBS}?application={application}&type=wanted&limit=3&cursor={first['next_cursor']}"
    ).json()

    assert set(j["id"] for j in first["data"] + rest["data"]) == wanted
    assert rest["next_cursor"] is None


def test_runs_filter_by_state_and_page(client: TestClient) -> None:
    job = client.post(JOBS, json={"name": "runs", "tasks": [{"name": "a", "type": "noop"}]})
    job_id, first_run = job.json()["id"], job.json()["run_id"]
    more = [client.post(f"{JOBS}/{job_id}/runs").json()["id"] for _ in range(3)]
    canceled = client.post(f"/api/v1/runs/{first_run}/cancel")
    assert canceled.json()["state"] == "CANCELED", canceled.text

    ready = client.get(f"{JOBS}/{job_id}/runs?state=READY&limit=2").json()
    rest = client.get(
        f"{JOBS}/{job_id}/runs?state=READY&limit=2&cursor={ready['next_cursor']}"
    ).json()
    done = client.get(f"{JOBS}/{job_id}/runs?state=CANCELED").json()

    assert [r["id"] for r in ready["data"] + rest["data"]] == more[::-1]
    assert rest["next_cursor"] is None
    assert [r["id"] for r in done["data"]] == [first_run]


def test_an_unknown_state_is_refused_naming_the_parameter(client: TestClient) -> None:
    response = client.get(f"{JOBS}/{uuid.uuid4()}/runs?state=DONE")

    assert response.status_code == 422
    assert "query parameter state" in response.json()["detail"]
