"""The client commands a person types: ``runs``, ``logs`` and ``logs -f`` (issue 6)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from .conftest import ADMIN_TOKEN, System, submit, wait_run

pytestmark = pytest.mark.e2e

TICKING = [sys.executable, "-u", "-c",
           "import time\nfor word in ('one', 'two', 'three'):\n print(word); time.sleep(1.5)"]


def command(system: System, *args: str) -> list[str]:
    return [sys.executable, "-m", "scheduler.cli.main", *args, "--api-url",
            system.base.removesuffix("/api/v1"), "--token", ADMIN_TOKEN]


def cli(system: System, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**system.env, "COLUMNS": "200"}  # a wide terminal: whole ids in the tables
    return subprocess.run(command(system, *args), env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_runs_lists_a_jobs_runs_newest_first(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "cli-runs", "tasks": [{"name": "t", "type": "noop"}]})
    wait_run(api, job["run_id"])
    second = api.post(f"/jobs/{job['id']}/runs").json()["id"]
    wait_run(api, second)

    listed = cli(system, "runs", job["id"])

    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.index(second) < listed.stdout.index(job["run_id"])
    assert listed.stdout.count("COMPLETED") == 2
    missing = cli(system, "runs", "00000000-0000-4000-8000-000000000000")
    assert missing.returncode == 1 and missing.stderr.startswith("error: 404")


def test_logs_prints_a_finished_tasks_log(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "cli-logs", "tasks": [
        {"name": "say", "type": "shell", "params": {"argv": ["echo", "hello from the task"]}},
    ]})
    wait_run(api, job["run_id"])

    printed = cli(system, "logs", job["run_id"], "say")

    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == "hello from the task\n"


def test_logs_follow_streams_lines_while_the_task_runs(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "cli-follow", "tasks": [
        {"name": "tick", "type": "shell", "params": {"argv": TICKING}},
    ]})
    with subprocess.Popen(command(system, "logs", "-f", job["run_id"], "tick"), env=system.env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as follower:
        assert follower.stdout is not None
        first = follower.stdout.readline()
        state_at_first_line = api.get(f"/runs/{job['run_id']}").json()["tasks"][0]["state"]
        rest, errors = follower.communicate(timeout=60)

    assert first == "one\n"
    assert state_at_first_line == "ACTIVE", "the first line came only after the task ended"
    assert rest == "two\nthree\n", errors
    assert follower.returncode == 0
    assert wait_run(api, job["run_id"])["state"] == "COMPLETED"
