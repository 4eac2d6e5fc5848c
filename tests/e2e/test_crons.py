"""Cron schedules end to end: DST previews over REST, and two real beats firing once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from .conftest import System, submit, wait_run

pytestmark = pytest.mark.e2e

NOOP = [{"name": "a", "type": "noop"}]

MINUTE = timedelta(minutes=1)


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
    cases: list[tuple[dict[str, int | str], str]] = [
        ({"count": 0}, "count"), ({"count": 5000}, "count"),
        ({"after": "2027-01-01T00:00:00"}, "after"), ({"after": "tomorrow"}, "after"),
    ]
    for params, name in cases:
        response = api.get(f"/jobs/{job['id']}/fire-times", params=params)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert name in response.json()["detail"]
    missing = api.get("/jobs/00000000-0000-4000-8000-000000000000/fire-times")
    assert missing.status_code == 404


def test_two_beats_fire_many_every_minute_jobs_exactly_once(
    api: httpx.Client, system: System,
) -> None:
    """Two real beats, 40 every-minute jobs, two minute boundaries: one run per fire."""
    system.start("beat2", "beat")
    try:
        jobs = [submit(api, {"name": f"every-minute-{i}", "tasks": NOOP,
                             "schedule": {"cron": "* * * * *"}}) for i in range(40)]
        first = {job["id"]: datetime.fromisoformat(job["next_fire_times"][0]) for job in jobs}
        last = max(first.values()) + MINUTE
        # Wait for every expected fire (a busy machine may write some late), then a
        # second fire of any minute would show in the lists compared below.
        fired = _wait_fired(api, first, last, deadline=last + timedelta(seconds=60))
        runs = api.get(f"/jobs/{jobs[0]['id']}/runs").json()["data"]
        (run_id,) = [r["id"] for r in runs
                     if datetime.fromisoformat(r["scheduled_for"]) == first[jobs[0]["id"]]]
        run = wait_run(api, run_id)
    finally:
        system.stop("beat2")
    for job_id, start in first.items():
        expected = [start + MINUTE * i for i in range(int((last - start) / MINUTE) + 1)]
        assert fired[job_id] == expected, job_id
    assert run["state"] == "COMPLETED"
    # Not early; how late (milliseconds) is measured in bench/, not bounded tightly here.
    lateness = datetime.fromisoformat(run["started_at"]) - first[jobs[0]["id"]]
    assert timedelta(0) <= lateness < timedelta(seconds=30), lateness


def _wait_fired(
    api: httpx.Client, first: dict[str, datetime], last: datetime, deadline: datetime,
) -> dict[str, list[datetime]]:
    """Each job's scheduled times once every job has fired from its first to ``last``."""
    while True:
        fired = {job_id: _scheduled(api, job_id) for job_id in first}
        if all(len(fired[job_id]) >= int((last - start) / MINUTE) + 1
               for job_id, start in first.items()):
            return fired
        assert datetime.now(UTC) < deadline, f"not every fire up to {last} came: {fired}"
        time.sleep(0.5)


def _scheduled(api: httpx.Client, job_id: str) -> list[datetime]:
    """When the job's runs were scheduled for, in order (duplicates kept)."""
    runs = api.get(f"/jobs/{job_id}/runs", params={"limit": 100}).json()["data"]
    return sorted(datetime.fromisoformat(r["scheduled_for"]) for r in runs)


def wait_for_runs(api: httpx.Client, job_id: str, deadline: datetime) -> list[dict[str, object]]:
    while datetime.now(UTC) < deadline:
        runs = api.get(f"/jobs/{job_id}/runs").json()["data"]
        if runs:
            return list(runs)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not fire by {deadline}")
