"""Issue 2 end to end: real api, engine, beat, notify and worker processes over REST."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import journal, submit, tasks_by_name, wait_run

pytestmark = pytest.mark.e2e


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def shell(name: str, argv: list[str], **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "shell", "params": {"argv": argv}, **extra}


def ready_entries(entries: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["task"] == task and e["to"] == "READY"]


def test_a_linear_chain_runs_in_order(api: httpx.Client) -> None:
    tasks = [{"name": f"step{i}", "type": "noop", "next": [f"step{i + 1}"]} for i in range(3)]
    tasks.append({"name": "step3", "type": "noop"})
    job = submit(api, {"name": "chain", "tasks": tasks})
    run = wait_run(api, job["run_id"])
    assert run["state"] == "COMPLETED"
    by_name = tasks_by_name(run)
    for i in range(3):
        assert ts(by_name[f"step{i}"]["finished_at"]) <= ts(by_name[f"step{i + 1}"]["started_at"])
    assert run["progress"] == {"COMPLETED": 4}


def test_split_join_runs_branches_in_parallel_and_the_join_once(
    api: httpx.Client, tmp_path: Path,
) -> None:
    # Each branch marks its start, then waits (up to a minute) for the others' marks: a
    # barrier that only branches running at the same time pass, however busy the machine.
    barrier = ("import pathlib, sys, time; d = pathlib.Path(sys.argv[1]); "
               "(d / sys.argv[2]).touch(); end = time.monotonic() + 60\n"
               "while len(list(d.iterdir())) < 3:\n"
               "    assert time.monotonic() < end, 'the other branches did not start'\n"
               "    time.sleep(0.05)\n")
    marks = tmp_path / "started"
    marks.mkdir()

    def branch(name: str) -> dict[str, Any]:
        return shell(name, [sys.executable, "-c", barrier, str(marks), name], next=["join"])

    job = submit(api, {"name": "split-join", "tasks": [
        {"name": "split", "type": "noop", "next": ["a", "b", "c"]},
        branch("a"), branch("b"), branch("c"),
        {"name": "join", "type": "noop"},
    ]})
    run = wait_run(api, job["run_id"])
    assert run["state"] == "COMPLETED"
    by_name = tasks_by_name(run)
    starts = [ts(by_name[n]["started_at"]) for n in "abc"]
    ends = [ts(by_name[n]["finished_at"]) for n in "abc"]
    assert max(starts) < min(ends), "branches did not overlap"
    assert ts(by_name["join"]["started_at"]) >= max(ends)
    assert len(ready_entries(journal(api, job["run_id"]), "join")) == 1


def test_a_200_task_fan_out_fan_in_dispatches_every_join_once(api: httpx.Client) -> None:
    width = 200
    tasks = [{"name": "start", "type": "noop", "next": [f"w{i}" for i in range(width)]}]
    tasks += [{"name": f"w{i}", "type": "noop", "next": ["join"]} for i in range(width)]
    tasks.append({"name": "join", "type": "noop"})
    job = submit(api, {"name": "fan", "tasks": tasks})
    run = wait_run(api, job["run_id"], timeout_s=120)
    assert run["state"] == "COMPLETED"
    assert run["progress"] == {"COMPLETED": width + 2}
    entries = journal(api, job["run_id"])
    assert len(ready_entries(entries, "join")) == 1
    assert all(len(ready_entries(entries, f"w{i}")) == 1 for i in range(width))


SHELL_PROBE = """
import json, os, sys
print("job", os.environ["JOB_ID"], "run", os.environ["RUN_ID"], "tenant", os.environ["TENANT_ID"])
print("params", os.environ["JOB_PARAMS"])
print("storage", os.environ["JOB_STORAGE"])
print("to stderr", file=sys.stderr)
count = json.loads(os.environ["JOB_STORAGE"]).get("count", 0)
print("[saveJobStorage] " + json.dumps({"count": count + 1}))
"""


def test_shell_env_contract_logs_and_job_storage(api: httpx.Client) -> None:
    job = submit(api, {
        "name": "shell-env", "tenant": "acme", "params": {"region": "eu"},
        "tasks": [shell("probe", [sys.executable, "-c", SHELL_PROBE])],
    })
    first = wait_run(api, job["run_id"])
    assert first["state"] == "COMPLETED", first
    logs = api.get(f"/runs/{first['id']}/tasks/probe/logs").json()["lines"]
    text = "\n".join(line["line"] for line in logs)
    assert f"job {job['id']} run {first['id']} tenant acme" in text
    assert '"region": "eu"' in text
    assert "storage {}" in text
    assert {"stdout", "stderr"} <= {line["stream"] for line in logs}
    assert api.get(f"/jobs/{job['id']}").json()["storage"] == {"count": 1}
    second = api.post(f"/jobs/{job['id']}/runs")
    assert second.status_code == 201, second.text
    assert wait_run(api, second.json()["id"])["state"] == "COMPLETED"
    logs = api.get(f"/runs/{second.json()['id']}/tasks/probe/logs").json()["lines"]
    assert any(line["line"] == 'storage {"count": 1}' for line in logs)
    assert api.get(f"/jobs/{job['id']}").json()["storage"] == {"count": 2}


def test_a_failing_task_fails_the_run_and_cancels_the_rest(api: httpx.Client) -> None:
    job = submit(api, {"name": "fails", "tasks": [
        {"name": "start", "type": "noop", "next": ["bad", "slow"]},
        shell("bad", [sys.executable, "-c", "raise SystemExit(3)"], next=["after"]),
        {"name": "slow", "type": "sleep", "params": {"seconds": 30}},
        {"name": "after", "type": "noop"},
    ]})
    run = wait_run(api, job["run_id"])
    assert run["state"] == "FAILED"
    by_name = tasks_by_name(run)
    assert by_name["bad"]["state"] == "FAILED"
    assert by_name["bad"]["output"] == {"exit_code": 3}
    assert by_name["after"]["state"] == "CANCELED"
    assert by_name["slow"]["state"] == "CANCELED"


def test_a_task_with_retries_soft_fails_then_completes_on_attempt_two(
    api: httpx.Client, tmp_path: Path
) -> None:
    marker = tmp_path / "tried"
    flaky = f"import os,sys; p={str(marker)!r}; ok=os.path.exists(p); open(p,'a').close(); " \
            "sys.exit(0 if ok else 1)"
    job = submit(api, {"name": "flaky", "tasks": [
        shell("flaky", [sys.executable, "-c", flaky], retries=2, retry_backoff=0.2),
    ]})
    run = wait_run(api, job["run_id"])
    assert run["state"] == "COMPLETED"
    assert tasks_by_name(run)["flaky"]["attempt"] == 2
    moves = [(e["from"], e["to"]) for e in journal(api, job["run_id"]) if e["task"] == "flaky"]
    assert ("ACTIVE", "SOFT_FAILED") in moves
    assert moves[-1] == ("ACTIVE", "COMPLETED")


def test_below_the_failure_threshold_other_branches_finish(api: httpx.Client) -> None:
    job = submit(api, {"name": "threshold", "failure_threshold": 0.5, "tasks": [
        shell("bad", [sys.executable, "-c", "raise SystemExit(1)"], next=["bad_child"]),
        {"name": "bad_child", "type": "noop"},
        {"name": "good", "type": "noop", "next": ["good_child"]},
        {"name": "good_child", "type": "noop"},
    ]})
    run = wait_run(api, job["run_id"])
    assert run["state"] == "COMPLETED"
    states = {name: t["state"] for name, t in tasks_by_name(run).items()}
    assert states == {"bad": "FAILED", "bad_child": "SKIPPED", "good": "COMPLETED",
                      "good_child": "COMPLETED"}


def test_a_one_off_at_run_starts_on_time(api: httpx.Client) -> None:
    """Not before its time, and without waiting for anything else (a minute, a tick).

    How late it starts (milliseconds) is measured in bench/: a loaded 2-core machine
    delays the worker's report of the start by more than any tight bound.
    """
    at = datetime.now(UTC) + timedelta(seconds=3)
    job = submit(api, {"name": "at", "schedule": {"at": at.isoformat()},
                       "tasks": [{"name": "only", "type": "noop"}]})
    run = wait_run(api, job["run_id"])
    assert run["state"] == "COMPLETED"
    started = ts(tasks_by_name(run)["only"]["started_at"])
    lateness = (started - at).total_seconds()
    assert 0 <= lateness < 30, f"started {lateness:.3f} s after its time"


def test_metrics_show_the_engine_and_beat_loop_timings(api: httpx.Client) -> None:
    """The engine and beat processes write their loop histograms for ``GET /metrics``."""
    job = submit(api, {"name": "metrics-probe", "tasks": [{"name": "t", "type": "noop"}]})
    assert wait_run(api, job["run_id"])["state"] == "COMPLETED"
    deadline = time.monotonic() + 20  # each process writes every 5 s
    loops: set[str] = set()
    while time.monotonic() < deadline and loops != {"engine_batch", "beat_step"}:
        text = api.get("/metrics").text
        loops = {
            s.labels["loop"] for family in text_string_to_metric_families(text)
            if family.name == "stellwerk_loop_seconds"
            for s in family.samples if s.name.endswith("_count") and s.value > 0
        }
        time.sleep(0.5)
    assert loops == {"engine_batch", "beat_step"}
