"""``GET /workers`` over real processes (issue 17): each live worker says what it runs."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from .conftest import submit, wait_run

pytestmark = pytest.mark.e2e


def test_a_worker_lists_its_types_and_the_attempt_it_runs(api: httpx.Client) -> None:
    name = f"busy-{uuid.uuid4().hex[:6]}"
    job = submit(api, {"name": name, "tasks": [
        {"name": "nap", "type": "sleep", "params": {"seconds": 2}}]})
    deadline = time.monotonic() + 30
    running: list[dict[str, object]] = []
    while time.monotonic() < deadline and not running:
        workers = api.get("/workers").json()["data"]
        running = [dict(item, worker=w["hostname"], types=w["types"])
                   for w in workers for item in w["running"] if item["job_name"] == name]
        time.sleep(0.1)
    assert running, "no worker said it runs the nap"
    (nap,) = running
    assert (nap["task"], nap["attempt"], nap["run_id"]) == ("nap", 1, job["run_id"])
    assert "sleep" in nap["types"]  # type: ignore[operator]
    wait_run(api, job["run_id"])
    idle = [w for w in api.get("/workers").json()["data"] if w["hostname"] == nap["worker"]]
    assert idle and all(item["job_name"] != name for item in idle[0]["running"])
