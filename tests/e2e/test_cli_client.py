"""The client commands a person types: ``runs``, ``logs`` and ``logs -f`` (issue 6);
``apply``, jobs by name, ``events`` and ``--json`` (issue 17)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from .conftest import System, cli, command, submit, wait_run

pytestmark = pytest.mark.e2e

TICKING = [sys.executable, "-u", "-c",
           "import time\nfor word in ('one', 'two', 'three'):\n print(word); time.sleep(1.5)"]



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


def test_submit_warns_of_a_type_no_worker_serves_and_show_says_what_the_task_waits_for(
    api: httpx.Client, system: System, tmp_path: Path,
) -> None:
    lonely = f"lonely_{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: cli-unserved\ntasks:\n  - {{name: a, type: noop, next: [b]}}\n"
                    f"  - {{name: b, type: {lonely}}}\n")

    submitted = cli(system, "submit", str(spec))

    assert submitted.returncode == 0, submitted.stderr
    assert f"warning: no worker serves type {lonely!r}" in submitted.stdout
    run_id = next(line.split()[1] for line in submitted.stdout.splitlines()
                  if line.startswith("run "))
    _await_task_state(api, run_id, "b", "READY")
    shown = cli(system, "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"no worker serves type {lonely!r}" in shown.stdout


def _await_task_state(api: httpx.Client, run_id: str, task: str, state: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if {t["name"]: t["state"] for t in api.get(f"/runs/{run_id}").json()["tasks"]}[task] \
                == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"task {task} of run {run_id} never reached {state}")


def test_jobs_are_applied_from_files_by_name_and_run_by_name(
    api: httpx.Client, system: System, tmp_path: Path,
) -> None:
    """Issue 17: ``apply`` creates, then changes nothing, then what the file changed."""
    name = f"as-code-{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "jobs" / f"{name}.yaml"
    spec.parent.mkdir()
    spec.write_text(f"name: {name}\ndraft: true\ntasks:\n  - {{name: a, type: noop}}\n")
    created = cli(system, "apply", str(spec.parent))
    assert created.returncode == 0, created.stderr
    assert f"{name} ({spec}): created" in created.stdout and "+ tasks.a" in created.stdout
    again = cli(system, "apply", str(spec))
    assert f"{name} ({spec}): unchanged" in again.stdout
    spec.write_text(f"name: {name}\ndraft: true\nlabels: {{team: ops}}\n"
                    "tasks:\n  - {name: a, type: noop, retries: 2}\n")
    looked = cli(system, "apply", str(spec), "--dry-run")
    assert "would be updated" in looked.stdout and "~ tasks.a.retries: 0 -> 2" in looked.stdout
    assert api.get(f"/jobs/{name}").json()["labels"] == {}
    changed = cli(system, "apply", str(spec))
    assert "updated" in changed.stdout and api.get(f"/jobs/{name}").json()["labels"] == {
        "team": "ops"}
    assert cli(system, "job", "commit", name).returncode == 0
    ran = cli(system, "run-now", name)
    assert ran.returncode == 0, ran.stderr
    run_id = ran.stdout.split()[1]
    followed = cli(system, "events", "--run", run_id)  # ends by itself with the run
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert "run.scheduled" in lines[0] and "run.done" in lines[-1]
    assert any("task.completed" in line and " a " in line for line in lines)
    shown = cli(system, "show", run_id, "--json")
    assert json.loads(shown.stdout)["state"] == "COMPLETED"


def test_jobs_written_in_python_are_applied(
    api: httpx.Client, system: System, tmp_path: Path,
) -> None:
    """Issue 17: ``stellwerk.sdk`` jobs, applied as ``module:attr`` from their folder."""
    name = f"py-{uuid.uuid4().hex[:6]}"
    (tmp_path / "pipelines.py").write_text(
        "from stellwerk.sdk import Job\n"
        f"job = Job({name!r}, draft=True)\n"
        "extract = job.task('extract', 'noop')\n"
        "load = job.task('load', 'noop', retries=1)\n"
        "extract >> load\n")
    env = {**system.env, "COLUMNS": "200"}
    applied = subprocess.run(command(system, "apply", "pipelines:job"), cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert applied.returncode == 0, applied.stderr
    assert f"{name} (pipelines:job): created" in applied.stdout
    tasks = {t["name"]: t for t in api.get(f"/jobs/{name}").json()["tasks"]}
    assert tasks["extract"]["next"] == ["load"] and tasks["load"]["retries"] == 1


def test_a_runs_attempts_are_headed_and_a_task_of_a_failed_run_points_to_retry(
    api: httpx.Client, system: System, tmp_path: Path,
) -> None:
    """Issue 17: ``logs`` heads each attempt (stderr); a refusal says what to do instead."""
    marker = tmp_path / "tried"
    flaky = (f"import os,sys; p={str(marker)!r}; ok=os.path.exists(p); open(p,'a').close(); "
             "print('try', 2 if ok else 1); sys.exit(0 if ok else 1)")
    job = submit(api, {"name": f"cli-attempts-{uuid.uuid4().hex[:6]}", "tasks": [
        {"name": "flaky", "type": "shell", "params": {"argv": [sys.executable, "-c", flaky]},
         "retries": 1, "retry_backoff": 0.2},
    ]})
    assert wait_run(api, job["run_id"])["state"] == "COMPLETED"
    printed = cli(system, "logs", job["run_id"], "flaky")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == "try 1\ntry 2\n"  # the log as the task wrote it
    assert "--- attempt 1 ---" in printed.stderr and "--- attempt 2 ---" in printed.stderr

    failed = submit(api, {"name": f"cli-failed-{uuid.uuid4().hex[:6]}", "tasks": [
        {"name": "bad", "type": "shell", "params": {"argv": [sys.executable, "-c", "exit(3)"]}},
    ]})
    assert wait_run(api, failed["run_id"])["state"] == "FAILED"
    alone = cli(system, "retry", failed["run_id"], "--task", "bad")
    assert alone.returncode == 1 and "409" in alone.stderr
    assert "stellwerk retry RUN" in alone.stderr, alone.stderr


def test_fire_times_tokens_subscriptions_and_narrow_tables(
    api: httpx.Client, system: System,
) -> None:
    """Issue 17's read and admin commands on a running system, a cron job named by name."""
    name = f"nightly-{uuid.uuid4().hex[:6]}"
    submit(api, {"name": name, "draft": True, "tasks": [{"name": "t", "type": "noop"}],
                 "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}})
    times = cli(system, "fire-times", name, "--count", "3")
    assert times.returncode == 0, times.stderr
    assert "02:30:00 CE" in times.stdout  # in the job's zone (CET or CEST) ...
    assert ("01:30:00" in times.stdout) or ("00:30:00" in times.stdout)  # ... UTC beside
    once = submit(api, {"name": f"once-{name}", "draft": True,
                        "tasks": [{"name": "t", "type": "noop"}]})
    unscheduled = cli(system, "fire-times", once["id"])
    assert unscheduled.returncode == 0, unscheduled.stderr
    assert "has no cron schedule" in unscheduled.stdout and "UTC" not in unscheduled.stdout

    made = api.post("/tokens", json={"name": f"ci-{name}", "scopes": ["job.read"]})
    assert made.status_code == 201, made.text
    token = made.json()
    listed = cli(system, "token", "list")
    assert listed.returncode == 0 and token["id"] in listed.stdout
    assert token["token"] not in listed.stdout  # never shown again
    revoked = cli(system, "token", "revoke", token["id"])
    assert revoked.returncode == 0, revoked.stderr
    refused = httpx.get(f"{system.base}/jobs",
                        headers={"Authorization": f"Bearer {token['token']}"})
    assert refused.status_code == 401

    subscribed = cli(system, "subscription", "create", "--event", "run.*",
                     "--celery-task", "ops.on_run", "--job", name)
    assert subscribed.returncode == 0, subscribed.stderr
    subscription = subscribed.stdout.split()[1]  # "subscription ID created"
    mine = [s for s in json.loads(cli(system, "subscription", "list", "--json").stdout)["data"]
            if s["id"] == subscription]
    assert mine and mine[0]["selector"]["job_id"] == api.get(f"/jobs/{name}").json()["id"]
    assert subscription in cli(system, "subscription", "list").stdout
    assert cli(system, "subscription", "delete", subscription).returncode == 0
    assert subscription not in cli(system, "subscription", "list").stdout

    narrow = subprocess.run(command(system, "jobs"), env={**system.env, "COLUMNS": "40"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert narrow.returncode == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 40
    assert "left out" in " ".join(narrow.stdout.split()) and "--json" in narrow.stdout
