"""Cron schedules end to end: DST previews over REST, and two real beats firing once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from .conftest import System, submit, wait_run

pytestmark = pytest.mark.e2e

NOOP = [{"name": "a", "type": "noop"}]


def fire_times(api: httpx.Client, job_id: str, after: str, count: int) -> list[str]:
    response = api.get(f"/jobs/{job_id}/fire-times", params={"after": after, "count": count})
    assert response.status_code == 200, response.text
    return list(response.json()["fire_times"])


def test_fire_times_around_the_2027_clock_changes_are_classic_cron(api: httpx.Client) -> None:
    job = submit(api, {"name": "berlin-0230", "tasks": NOOP,
                       "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}})
    assert len(job["next_fire_times"]) == 5
    assert all(t.endswith("Z") for t in job["next_fire_times"])
    # Spring: 02:30 does not exist on 2027-03-28; it fires right after the gap (03:00 CEST).
    assert fire_times(api, job["id"], "2027-03-27T00:00:00Z", 3) == [
        "2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]
    # Autumn: 02:30 occurs twice on 2027-10-31; it fires once, at the first (CEST).
    assert fire_times(api, job["id"], "2027-10-30T00:00:00+02:00", 3) == [
        "2027-10-30T00:30:00Z", "2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"]


def test_fire_times_refuses_bad_input(api: httpx.Client) -> None:
    job = submit(api, {"name": "preview-errors", "tasks": NOOP,
                       "schedule": {"cron": "0 10 * * *"}})
    for params, name in [({"count": 0}, "count"), ({"count": 5000}, "count"),
                         ({"after": "2027-01-01T00:00:00"}, "after"),
                         ({"after": "tomorrow"}, "after")]:
        response = api.get(f"/jobs/{job['id']}/fire-times", params=params)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert name in response.json()["detail"]
    missing = api.get("/jobs/00000000-0000-4000-8000-000000000000/fire-times")
    assert missing.status_code == 404


def test_two_beats_fire_an_every_minute_job_exactly_once(
    api: httpx.Client, system: System,
) -> None:
    system.start("beat2", "beat")
    try:
        job = submit(api, {"name": "every-minute", "tasks": NOOP,
                           "schedule": {"cron": "* * * * *"}})
        boundary = datetime.fromisoformat(job["next_fire_times"][0])
        runs = wait_for_runs(api, job["id"], deadline=boundary + timedelta(seconds=10))
        run = wait_run(api, runs[0]["id"])
        # Well past the fire both beats have seen it; still one run.
        while datetime.now(UTC) < boundary + timedelta(seconds=3):
            time.sleep(0.1)
        runs = api.get(f"/jobs/{job['id']}/runs").json()["data"]
    finally:
        system.stop("beat2")
    assert [(datetime.fromisoformat(r["scheduled_for"]), r["trigger"]) for r in runs] == [
        (boundary, "schedule")]
    assert run["state"] == "COMPLETED"
    lateness = datetime.fromisoformat(run["started_at"]) - boundary
    assert timedelta(0) <= lateness < timedelta(seconds=1), lateness


def wait_for_runs(api: httpx.Client, job_id: str, deadline: datetime) -> list[dict[str, object]]:
    while datetime.now(UTC) < deadline:
        runs = api.get(f"/jobs/{job_id}/runs").json()["data"]
        if runs:
            return list(runs)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not fire by {deadline}")
