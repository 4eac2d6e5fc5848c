"""Issue 3, run control end to end: cancel, pause, resume, retry, confirm, reject, skip.

Real api, engine, beat, notify and worker processes, driven over REST and the CLI.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import ADMIN_TOKEN, System, journal, submit, tasks_by_name, wait_run
from .conftest import wait_run_until as wait_for

pytestmark = pytest.mark.e2e
Run = dict[str, Any]


def in_state(state: str) -> Callable[[Run], bool]:
    return lambda run: run["state"] == state


def task_in(task: str, state: str) -> Callable[[Run], bool]:
    return lambda run: tasks_by_name(run)[task]["state"] == state


def act(api: httpx.Client, path: str, status: int = 200) -> Run:
    response = api.post(path)
    assert response.status_code == status, response.text
    return dict(response.json())


def states(run: Run) -> dict[str, str]:
    return {name: task["state"] for name, task in tasks_by_name(run).items()}


def shell(name: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "shell", "params": {"argv": [sys.executable, "-c", code]},
            **extra}


def sleeper(name: str, seconds: float, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "sleep", "params": {"seconds": seconds}, **extra}


# --- canary and confirmation ------------------------------------------------------------


def canary_job(name: str) -> dict[str, Any]:
    """A split into three tasks of one type; each takes a second, so that the run is
    still ACTIVE when the confirm's answer is read (with no-ops, a fast engine and worker
    sometimes finished the run before the API read it back)."""
    pause = [sys.executable, "-c", "import time; time.sleep(1)"]
    return {"name": name, "canary": True, "tasks": [
        sleeper("start", 0, next=["x1", "x2", "x3"]),
        *({"name": f"x{i}", "type": "shell", "params": {"argv": pause}} for i in (1, 2, 3)),
    ]}


def test_a_canary_waits_for_confirmation_then_the_rest_runs_through(api: httpx.Client) -> None:
    run_id = submit(api, canary_job("canary-confirm"))["run_id"]
    run = wait_for(api, run_id, in_state("CONFIRM"))
    xs = {n: s for n, s in states(run).items() if n != "start"}
    assert sorted(xs.values()) == ["CONFIRM", "WAITING", "WAITING"]
    assert all(t["started_at"] is None for n, t in tasks_by_name(run).items()
               if xs.get(n) == "WAITING")
    confirmed = act(api, f"/runs/{run_id}/confirm")
    assert confirmed["state"] == "ACTIVE"
    run = wait_run(api, run_id)
    assert run["state"] == "COMPLETED"
    assert run["progress"] == {"COMPLETED": 4}
    confirms = [e for e in journal(api, run_id) if e["to"] == "CONFIRM"]
    assert len(confirms) == 2  # the canary task and the run, once each


def test_rejecting_the_canary_fails_the_run_and_cancels_the_rest(api: httpx.Client) -> None:
    run_id = submit(api, canary_job("canary-reject"))["run_id"]
    run = wait_for(api, run_id, in_state("CONFIRM"))
    canary = next(n for n, s in states(run).items() if s == "CONFIRM")
    rejected = act(api, f"/runs/{run_id}/tasks/{canary}/reject")
    assert rejected["state"] == "FAILED"
    assert states(rejected) == {
        "start": "COMPLETED", **{f"x{i}": "CANCELED" for i in (1, 2, 3)}, canary: "REJECTED",
    }


# --- cancel -----------------------------------------------------------------------------


def test_cancel_stops_a_long_task_within_the_grace_period(api: httpx.Client) -> None:
    run_id = submit(api, {"name": "cancel-sleep", "tasks": [sleeper("long", 120)]})["run_id"]
    wait_for(api, run_id, task_in("long", "ACTIVE"))
    asked = time.monotonic()
    assert act(api, f"/runs/{run_id}/cancel")["state"] in {"CANCEL_REQUESTED", "CANCELED"}
    run = wait_run(api, run_id, timeout_s=30)  # the default grace period
    assert run["state"] == "CANCELED"
    assert states(run) == {"long": "CANCELED"}
    assert time.monotonic() - asked < 10, "the task was not stopped, only timed out"


def test_cancel_of_a_completed_run_is_409_naming_completed(api: httpx.Client) -> None:
    run_id = submit(api, {"name": "cancel-done", "tasks": [{"name": "a", "type": "noop"}]})[
        "run_id"]
    assert wait_run(api, run_id)["state"] == "COMPLETED"
    response = api.post(f"/runs/{run_id}/cancel")
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "run is COMPLETED: cannot cancel"
    assert api.get(f"/runs/{run_id}").json()["state"] == "COMPLETED"


def test_cancel_while_pausing_cancels_the_paused_tasks_too(api: httpx.Client) -> None:
    # No worker serves "unserved": its task stays READY, so the pause parks it PAUSED.
    run_id = submit(api, {"name": "cancel-pausing", "tasks": [
        sleeper("long", 120), {"name": "parked", "type": "unserved"},
    ]})["run_id"]
    wait_for(api, run_id, task_in("long", "ACTIVE"))
    paused = act(api, f"/runs/{run_id}/pause")
    assert paused["state"] == "PAUSE_REQUESTED"
    assert states(paused) == {"long": "ACTIVE", "parked": "PAUSED"}
    canceled = act(api, f"/runs/{run_id}/cancel")
    assert states(canceled)["parked"] == "CANCELED"
    run = wait_run(api, run_id, timeout_s=30)
    assert run["state"] == "CANCELED"
    assert states(run) == {"long": "CANCELED", "parked": "CANCELED"}


# --- pause and resume -------------------------------------------------------------------


def test_pause_waits_for_the_active_task_and_nothing_starts_until_resume(
    api: httpx.Client,
) -> None:
    run_id = submit(api, {"name": "pause-resume", "tasks": [
        sleeper("first", 2, next=["second"]), {"name": "second", "type": "noop"},
    ]})["run_id"]
    wait_for(api, run_id, task_in("first", "ACTIVE"))
    assert act(api, f"/runs/{run_id}/pause")["state"] == "PAUSE_REQUESTED"
    run = wait_for(api, run_id, in_state("PAUSED"))
    assert states(run) == {"first": "COMPLETED", "second": "WAITING"}
    end = time.monotonic() + 1.5  # a paused run must not move on by itself
    while time.monotonic() < end:
        assert api.get(f"/runs/{run_id}").json()["state"] == "PAUSED"
        time.sleep(0.1)
    assert act(api, f"/runs/{run_id}/resume")["state"] in {"ACTIVE", "COMPLETED"}
    run = wait_run(api, run_id)
    assert run["state"] == "COMPLETED"
    assert states(run) == {"first": "COMPLETED", "second": "COMPLETED"}


# --- retry ------------------------------------------------------------------------------


def test_retry_of_a_failed_run_does_not_repeat_completed_tasks(
    api: httpx.Client, tmp_path: Path
) -> None:
    effects, fixed = tmp_path / "effects", tmp_path / "fixed"
    count = f"open({str(effects)!r}, 'a').write('x\\n')"
    check = f"import os, sys; sys.exit(0 if os.path.exists({str(fixed)!r}) else 1)"
    run_id = submit(api, {"name": "retry-run", "tasks": [
        shell("count", count, next=["check"]), shell("check", check),
    ]})["run_id"]
    assert wait_run(api, run_id)["state"] == "FAILED"
    fixed.touch()
    assert act(api, f"/runs/{run_id}/retry")["state"] == "ACTIVE"
    run = wait_run(api, run_id)
    assert run["state"] == "COMPLETED"
    assert effects.read_text() == "x\n", "a COMPLETED task ran again"

    check_attempt = tasks_by_name(run)["check"]["attempt"]
    assert act(api, f"/runs/{run_id}/tasks/count/retry")["state"] == "ACTIVE"
    run = wait_run(api, run_id)
    assert run["state"] == "COMPLETED"
    assert effects.read_text() == "x\nx\n"
    assert tasks_by_name(run)["check"]["attempt"] > check_attempt  # descendants re-ran


# --- failure threshold and run timeout --------------------------------------------------


def test_one_failure_of_eleven_stays_below_a_threshold_of_a_tenth(api: httpx.Client) -> None:
    tasks = [shell("bad", "raise SystemExit(1)")]
    tasks += [{"name": f"ok{i}", "type": "noop"} for i in range(10)]
    run = wait_run(api, submit(api, {"name": "threshold-11", "failure_threshold": 0.1,
                                     "tasks": tasks})["run_id"])
    assert run["state"] == "COMPLETED"
    assert run["progress"] == {"COMPLETED": 10, "FAILED": 1}


def test_one_failure_of_ten_reaches_a_threshold_of_a_tenth(api: httpx.Client) -> None:
    tasks = [shell("bad", "import time; time.sleep(1); raise SystemExit(1)")]
    tasks += [sleeper(f"slow{i}", 120) for i in range(9)]
    run_id = submit(api, {"name": "threshold-10", "failure_threshold": 0.1, "tasks": tasks})[
        "run_id"]
    run = wait_run(api, run_id, timeout_s=30)
    assert run["state"] == "FAILED"
    assert run["progress"] == {"FAILED": 1, "CANCELED": 9}
    was_running = {e["task"] for e in journal(api, run_id)
                   if e["from"] == "ACTIVE" and e["to"] == "CANCELED"}
    assert was_running, "no running task was canceled"


def test_a_run_older_than_its_timeout_times_out(api: httpx.Client) -> None:
    run_id = submit(api, {"name": "run-timeout", "timeout": 2,
                          "tasks": [sleeper("long", 120)]})["run_id"]
    run = wait_run(api, run_id, timeout_s=20)
    assert run["state"] == "TIMEOUT"
    assert states(run) == {"long": "CANCELED"}


# --- the CLI ----------------------------------------------------------------------------


def cli(system: System, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", *args, "--api-url",
         system.base.removesuffix("/api/v1"), "--token", ADMIN_TOKEN],
        env=system.env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_cli_confirms_and_cancels(api: httpx.Client, system: System) -> None:
    confirm_id = submit(api, {"name": "cli-confirm", "tasks": [
        {"name": "gate", "type": "noop", "confirm": True},
    ]})["run_id"]
    wait_for(api, confirm_id, in_state("CONFIRM"))
    done = cli(system, "confirm", confirm_id)
    assert done.returncode == 0, done.stderr
    assert f"run {confirm_id} COMPLETED" in done.stdout

    refused = cli(system, "cancel", confirm_id)
    assert refused.returncode == 1
    assert refused.stderr.strip() == "error: 409 run is COMPLETED: cannot cancel"

    cancel_id = submit(api, {"name": "cli-cancel", "tasks": [sleeper("long", 120)]})["run_id"]
    wait_for(api, cancel_id, task_in("long", "ACTIVE"))
    canceled = cli(system, "cancel", cancel_id)
    assert canceled.returncode == 0, canceled.stderr
    assert f"run {cancel_id} CANCEL" in canceled.stdout
    assert wait_run(api, cancel_id, timeout_s=30)["state"] == "CANCELED"
