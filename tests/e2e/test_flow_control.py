"""Flow control over real processes: two engines, two workers, the API (issue 16).

Each test uses a key of its own. ACTIVE intervals are the workers' own start and finish
times; a slot is released only once the engine has applied the finish, and the next
attempt starts after that, so intervals on a key may touch but never overlap more
than its limit.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from .conftest import System, cli, journal, submit, wait_run, wait_run_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def second_engine_and_worker(system: System) -> Iterator[None]:
    system.start("engine-flow", "engine")
    system.start("worker-flow", "worker", "--types", "noop,sleep", "--concurrency", "4")
    yield
    system.stop("engine-flow")
    system.stop("worker-flow")


def key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


def fan(name: str, n: int, task_type: str = "noop", **task: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": f"t{i:03d}", "type": task_type, **task}
                                    for i in range(n)]}


def intervals(run: dict[str, Any]) -> list[tuple[datetime, datetime]]:
    return [(datetime.fromisoformat(t["started_at"]), datetime.fromisoformat(t["finished_at"]))
            for t in run["tasks"]]


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant (one ending as another starts: not both)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans],
                   key=lambda edge: (edge[0], edge[1]))
    open_now = most = 0
    for _, step in edges:
        open_now += step
        most = max(most, open_now)
    return most


def starts(run: dict[str, Any]) -> list[datetime]:
    return sorted(datetime.fromisoformat(t["started_at"]) for t in run["tasks"])


def test_a_key_with_limit_two_never_has_more_than_two_active_across_three_jobs(
    api: httpx.Client, second_engine_and_worker: None,
) -> None:
    limit = [{"key": key(), "limit": 2}]
    jobs = [submit(api, fan(f"limited-{i}", 4, "sleep", params={"seconds": 0.2},
                            concurrency=limit)) for i in range(3)]
    runs = [wait_run(api, job["run_id"], timeout_s=120) for job in jobs]
    assert all(run["state"] == "COMPLETED" for run in runs)
    spans = [span for run in runs for span in intervals(run)]
    assert most_at_once(spans) == 2


def test_a_backlog_on_a_wide_limit_runs_in_lanes_and_never_past_the_limit(
    api: httpx.Client, second_engine_and_worker: None,
) -> None:
    """Limit 8, 120 tasks of 0.3 s in two jobs on 12 worker threads: admitted in lanes (a
    slot's attempts run one after another) across two engines and two workers."""
    limit = [{"key": key(), "limit": 8}]
    jobs = [submit(api, fan(f"lanes{i}", 60, "sleep", params={"seconds": 0.3},
                            concurrency=limit)) for i in range(2)]
    runs = [wait_run(api, job["run_id"], timeout_s=120) for job in jobs]
    assert all(run["state"] == "COMPLETED" for run in runs)
    assert most_at_once([span for run in runs for span in intervals(run)]) <= 8
    listed = {row["key"] for row in api.get("/limits").json()["data"]}
    assert f"key:{limit[0]['key']}" not in listed  # no slot held, nothing waiting


def test_a_rate_of_ten_per_five_seconds_is_kept(
    api: httpx.Client, second_engine_and_worker: None,
) -> None:
    """Counted by the workers' start times, which trail the admissions by a few ms, and
    on a busy CI machine now and then by hundreds: no window a second shorter than the
    rate's holds more than its limit (with no rate, all 25 start within one)."""
    job = submit(api, fan("rated", 25, rate={"key": key(), "limit": 10, "per": 5}))
    run = wait_run(api, job["run_id"], timeout_s=120)
    assert run["state"] == "COMPLETED"
    times = starts(run)
    window = 4.0
    busiest = max(sum(1 for t in times if 0 <= (t - first).total_seconds() < window)
                  for first in times)
    assert busiest == 10
    assert (times[-1] - times[0]).total_seconds() >= 10  # three windows, at least


def test_a_high_priority_task_starts_before_the_low_priority_backlog(
    api: httpx.Client, second_engine_and_worker: None,
) -> None:
    """Counted from the moment the urgent task became READY (its journal entry), not
    from when the submission returned: the engine makes it READY a little later, and
    backlog tasks go on starting meanwhile. After that moment two backlog tasks may
    still start first: the one holding the slot then (admitted, not yet started) and
    one the other engine admitted in a transaction racing the urgent task's commit."""
    limit = [{"key": key(), "limit": 1}]
    low = submit(api, fan("backlog", 500, concurrency=limit, priority=0))
    wait_started(api, low["run_id"])
    high = submit(api, fan("urgent", 1, concurrency=limit, priority=9))
    urgent = starts(wait_run(api, high["run_id"], timeout_s=60))[0]
    backlog = starts_so_far(api, low["run_id"])
    api.post(f"/runs/{low['run_id']}/cancel")
    ready_at = next(datetime.fromisoformat(e["at"]) for e in journal(api, high["run_id"])
                    if e["task"] and e["to"] == "READY")
    before_ready = sum(1 for t in backlog if t < ready_at)
    assert before_ready < 100, "the backlog ran too fast to be one"
    assert sum(1 for t in backlog if t < urgent) <= before_ready + 2, (ready_at, urgent,
                                                                       backlog[-5:])


def test_a_small_tenant_is_not_held_behind_a_big_ones_backlog(
    api: httpx.Client, second_engine_and_worker: None,
) -> None:
    """Tenant B's 20 tasks all start before tenant A's 5,000 are half started."""
    limit = [{"key": key(), "limit": 3}]
    big = submit(api, {**fan("big", 5000, concurrency=limit), "tenant": "big-co"})
    wait_started(api, big["run_id"], timeout_s=60)
    small = submit(api, {**fan("small", 20, concurrency=limit), "tenant": "small-co"})
    last_small = starts(wait_run(api, small["run_id"], timeout_s=120))[-1]
    big_starts = starts_so_far(api, big["run_id"])
    api.post(f"/runs/{big['run_id']}/cancel")
    assert sum(1 for t in big_starts if t <= last_small) < 2500, len(big_starts)


def test_limits_are_set_and_listed_from_the_cli_and_a_held_task_says_why(
    api: httpx.Client, system: System, second_engine_and_worker: None,
) -> None:
    # A tenant of its own: a limit counts what already runs, and a type's key would count
    # what other tests left running of that type.
    tenant = f"cli-{uuid.uuid4().hex[:6]}"
    name = f"tenant:{tenant}"
    assert cli(system, "limit", "set", name, "1").returncode == 0
    try:
        time.sleep(1.1)  # engines read limits at most a second old
        # Each task holds the slot 5 s: `show` below must start (over a second on a small
        # machine) and read the run while the other task still waits for it.
        job = submit(api, {**fan("limited", 2, "sleep", params={"seconds": 5}),
                           "tenant": tenant})
        wait_run_until(api, job["run_id"], lambda r: r["state"] == "ACTIVE" and any(
            t.get("waiting_for") == f"concurrency {name} 1/1" for t in r["tasks"]))
        shown = cli(system, "show", job["run_id"])
        assert f"concurrency {name} 1/1" in " ".join(shown.stdout.split()), shown.stdout
        listed = cli(system, "limit", "list")
        assert name in listed.stdout and "1" in listed.stdout
    finally:
        assert cli(system, "limit", "delete", name).returncode == 0
    assert wait_run(api, job["run_id"], timeout_s=60)["state"] == "COMPLETED"


def test_a_limit_set_on_a_tenant_counts_what_already_runs(
    api: httpx.Client, system: System, second_engine_and_worker: None,
) -> None:
    """``limit set tenant:T 2`` while 3 of T's tasks run: the next waits until only one does.

    Without adoption the running three hold no slot of the new key and the next task
    would start at once (3 + 1 running under a limit of 2).
    """
    tenant = f"adopt-{uuid.uuid4().hex[:6]}"
    name = f"tenant:{tenant}"
    first = submit(api, {**fan("running", 3, "sleep", params={"seconds": 4}), "tenant": tenant})
    wait_run_until(api, first["run_id"], lambda r: all(t["state"] == "ACTIVE"
                                                        for t in r["tasks"]))
    assert cli(system, "limit", "set", name, "2").returncode == 0
    try:
        listed = api.get("/limits").json()["data"]
        assert {"key": name, "active": 3}.items() <= next(
            row for row in listed if row["key"] == name).items()
        time.sleep(1.1)  # engines read limits at most a second old
        later = submit(api, {**fan("later", 1), "tenant": tenant})
        held = wait_run_until(api, later["run_id"], lambda r: bool(r["tasks"][0].get(
            "waiting_for")))
        assert held["tasks"][0]["waiting_for"] == f"concurrency {name} 3/2"
        done = wait_run(api, first["run_id"])
        assert wait_run(api, later["run_id"])["state"] == "COMPLETED"
    finally:
        assert cli(system, "limit", "delete", name).returncode == 0
    ends = sorted(datetime.fromisoformat(t["finished_at"]) for t in done["tasks"])
    started = datetime.fromisoformat(api.get(f"/runs/{later['run_id']}").json()
                                     ["tasks"][0]["started_at"])
    assert started >= ends[1], "it started while two of the three still ran"


def wait_started(api: httpx.Client, run_id: str, timeout_s: float = 30) -> None:
    wait_run_until(api, run_id, lambda run: any(t.get("started_at") for t in run["tasks"]),
                   timeout_s=timeout_s)


def starts_so_far(api: httpx.Client, run_id: str) -> list[datetime]:
    """The start times of the run's tasks that have started, in order."""
    run = api.get(f"/runs/{run_id}").json()
    return sorted(datetime.fromisoformat(t["started_at"]) for t in run["tasks"]
                  if t.get("started_at"))


def test_a_job_capped_at_one_unfinished_run_runs_them_one_after_another(
    api: httpx.Client, second_engine_and_worker: None,
) -> None:
    job = submit(api, {**fan("one-at-a-time", 1, "sleep", params={"seconds": 0.3}),
                       "max_active_runs": 1})
    asked = [api.post(f"/jobs/{job['id']}/runs") for _ in range(2)]
    assert all(response.status_code == 201 for response in asked), asked
    run_ids = [job["run_id"], *(response.json()["id"] for response in asked)]
    runs = [wait_run(api, run_id, timeout_s=60) for run_id in run_ids]
    assert all(run["state"] == "COMPLETED" for run in runs)
    spans = sorted((datetime.fromisoformat(r["started_at"]),
                    datetime.fromisoformat(r["finished_at"])) for r in runs)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans
