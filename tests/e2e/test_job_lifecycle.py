"""A job's lifecycle end to end: draft, commit, PATCH, run-now, DELETE, with the CLI.

Real api, engine, beat, notify and worker processes; the ``job`` and ``run-now``
commands are run against them as a user runs them.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from scheduler.cli.main import build_app

from .conftest import ADMIN_TOKEN, System, submit, tasks_by_name, wait_run

pytestmark = pytest.mark.e2e

PRINT_PARAMS = [sys.executable, "-c", "import os; print('params', os.environ['JOB_PARAMS'])"]


def cli(system: System, *args: str) -> Result:
    """Run a ``stellwerk`` command against the system's API."""
    options = ["--api-url", f"http://127.0.0.1:{system.port}", "--token", ADMIN_TOKEN]
    return CliRunner().invoke(build_app(), [*args, *options], env={"COLUMNS": "200"})


def wait_state(api: httpx.Client, run_id: str, task: str, state: str) -> dict[str, Any]:
    end = time.monotonic() + 30
    run: dict[str, Any] = {}
    while time.monotonic() < end:
        run = api.get(f"/runs/{run_id}").json()
        if tasks_by_name(run)[task]["state"] == state:
            return run
        time.sleep(0.05)
    raise AssertionError(f"task {task} of run {run_id} never became {state}: {run}")


def test_a_draft_runs_once_committed(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "e2e-draft", "draft": True,
                       "tasks": [{"name": "only", "type": "noop"}]})
    assert (job["state"], job["run_id"]) == ("NEW", None)

    committed = cli(system, "job", "commit", job["id"])

    assert committed.exit_code == 0, committed.output
    run_id = api.get(f"/jobs/{job['id']}").json()["run_id"]
    assert run_id is not None and run_id in committed.output
    assert wait_run(api, run_id)["state"] == "COMPLETED"
    again = cli(system, "job", "commit", job["id"])
    assert again.exit_code == 1
    assert "409" in again.output and "COMPLETED" in again.output


def test_a_patched_job_runs_its_new_definition(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "e2e-patch", "tasks": [{"name": "first", "type": "noop"}]})
    assert wait_run(api, job["run_id"])["state"] == "COMPLETED"

    patched = api.patch(f"/jobs/{job['id']}", json={"params": {"colour": "blue"}, "tasks": [
        {"name": "first", "type": "noop", "next": ["second"]},
        {"name": "second", "type": "shell", "params": {"argv": PRINT_PARAMS}},
    ]})
    assert patched.status_code == 200, patched.text
    started = cli(system, "run-now", job["id"])

    assert started.exit_code == 0, started.output
    latest = api.get(f"/jobs/{job['id']}").json()["latest_run_id"]
    assert latest in started.output
    run = wait_run(api, latest)
    assert run["state"] == "COMPLETED"
    assert [t["name"] for t in run["tasks"]] == ["first", "second"]
    lines = api.get(f"/runs/{latest}/tasks/second/logs").json()["lines"]
    assert any('"colour": "blue"' in line["line"] for line in lines), lines
    listed = cli(system, "jobs", "--limit", "500")
    assert listed.exit_code == 0 and job["id"] in listed.output


def test_delete_waits_for_the_run_unless_forced(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "e2e-delete",
                       "tasks": [{"name": "nap", "type": "sleep", "params": {"seconds": 60}}]})
    wait_state(api, job["run_id"], "nap", "ACTIVE")

    refused = api.delete(f"/jobs/{job['id']}")
    assert refused.status_code == 409
    assert job["run_id"] in refused.json()["detail"]
    by_cli = cli(system, "job", "delete", job["id"])
    assert by_cli.exit_code == 1
    assert by_cli.output.strip().startswith("error: 409")
    assert api.get(f"/jobs/{job['id']}").status_code == 200

    forced = cli(system, "job", "delete", job["id"], "--force")

    assert forced.exit_code == 0, forced.output
    assert api.get(f"/jobs/{job['id']}").status_code == 404
    assert api.get(f"/runs/{job['run_id']}").status_code == 404
    assert api.delete(f"/jobs/{job['id']}?force=true").status_code == 404
    gone = cli(system, "job", "delete", job["id"])
    assert gone.exit_code == 1 and "404" in gone.output


def test_disable_and_enable_a_cron_job(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "e2e-cron", "schedule": {"cron": "0 10 1 1 *"},
                       "tasks": [{"name": "only", "type": "noop"}]})

    disabled = cli(system, "job", "disable", job["id"])
    assert disabled.exit_code == 0, disabled.output
    assert "disabled, version 2" in disabled.output
    assert api.get(f"/jobs/{job['id']}").json()["enabled"] is False
    enabled = cli(system, "job", "enable", job["id"])
    assert enabled.exit_code == 0, enabled.output
    assert "enabled, version 3" in enabled.output
    api.delete(f"/jobs/{job['id']}")
