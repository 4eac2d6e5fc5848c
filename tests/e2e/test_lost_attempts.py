"""Lost attempts end to end: a worker killed with SIGKILL, mid-task or right after a claim.

These tests kill and start workers, so they run on a Stellwerk of their own (own
database, own Redis database) with a short lease: the session's shared system keeps
its worker. The lease is 2 s and heartbeats come every 0.5 s.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import redis

from common.messaging.keys import claim_key
from common.persistence.migrate import upgrade
from tests.conftest import claim_redis_db, scratch_database

from .conftest import (
    ADMIN_TOKEN,
    System,
    free_port,
    journal,
    submit,
    tasks_by_name,
    wait_healthy,
    wait_run,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def own_system(
    server_urls: tuple[str, str], tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[System]:
    logs = tmp_path_factory.mktemp("lost-attempts-logs")
    redis_url = claim_redis_db(server_urls[1])
    with scratch_database(server_urls[0]) as database_url:
        upgrade(database_url)
        env = {
            **os.environ,
            "STELLWERK_DATABASE_URL": database_url, "STELLWERK_REDIS_URL": redis_url,
            "STELLWERK_ADMIN_TOKEN": ADMIN_TOKEN, "STELLWERK_DATA_DIR": str(logs / "data"),
            "STELLWERK_LEASE_TTL_S": "2", "STELLWERK_HEARTBEAT_INTERVAL_S": "0.5",
            "PYTHONUNBUFFERED": "1",
        }
        system = System(env, logs, free_port())
        for name in ("api", "engine", "beat"):
            system.start(name, name, *(("--port", str(system.port)) if name == "api" else ()))
        try:
            wait_healthy(system)
            yield system
        finally:
            for name in list(system.procs):
                system.stop(name)
            with contextlib.closing(redis.Redis.from_url(redis_url)) as client:
                client.flushdb()


@pytest.fixture
def own_api(own_system: System, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    with own_system.client() as client:
        yield client
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(own_system.dump_logs())  # noqa: T201


def worker(system: System, name: str, types: str = "sleep") -> None:
    system.start(name, "worker", "--types", types, "--concurrency", "2",
                 "--hostname", f"{name}@lost-attempts")


def wait_for(check: Callable[[], Any], timeout_s: float = 30) -> Any:
    """Poll ``check`` until it returns something truthy."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def recording_task(record: Path, seconds: float) -> dict[str, Any]:
    """A shell task that writes a line with its pid and attempt, then sleeps."""
    script = (
        "import os, sys, time; "
        "f = open(sys.argv[1], 'a'); f.write(f\"{os.getpid()} {os.environ['RUN_ID']}\\n\"); "
        "f.close(); time.sleep(float(sys.argv[2]))"
    )
    return {"name": "nap", "type": "shell",
            "params": {"argv": [sys.executable, "-c", script, str(record), str(seconds)]}}


def task_in(api: httpx.Client, run_id: str, state: str) -> dict[str, Any] | None:
    task = tasks_by_name(api.get(f"/runs/{run_id}").json())["nap"]
    return task if task["state"] == state else None


def test_a_worker_killed_mid_task_loses_its_attempt_to_a_second_worker(
    own_system: System, own_api: httpx.Client,
) -> None:
    worker(own_system, "first")
    job = submit(own_api, {"name": "killed-mid-task", "tasks": [
        {"name": "nap", "type": "sleep", "params": {"seconds": 3}}]})
    active = wait_for(lambda: task_in(own_api, job["run_id"], "ACTIVE"))
    assert active["attempt"] == 1
    own_system.stop("first", kill=True)  # SIGKILL: no goodbye, no result
    killed_at = time.monotonic()
    worker(own_system, "second")
    try:
        run = wait_run(own_api, job["run_id"], timeout_s=30)
    finally:
        own_system.stop("second")
    assert run["state"] == "COMPLETED"
    nap = tasks_by_name(run)["nap"]
    assert nap["attempt"] == 2
    assert time.monotonic() - killed_at < 20  # seconds, not a broker visibility timeout
    reasons = [e["reason"] for e in journal(own_api, job["run_id"]) if e["task"] == "nap"]
    assert "lease expired: worker lost" in reasons


def test_an_attempt_claimed_by_a_worker_that_died_before_starting_it_is_requeued(
    own_system: System, own_api: httpx.Client,
) -> None:
    # No worker serves the type yet: the attempt waits in its queue, READY, and is
    # never taken for lost while nobody has claimed it.
    job = submit(own_api, {"name": "killed-after-claim", "tasks": [
        {"name": "nap", "type": "sleep", "params": {"seconds": 0.1}}]})
    ready = wait_for(lambda: task_in(own_api, job["run_id"], "READY"))
    # The state a worker killed right after its claim leaves: the claim names a worker
    # whose liveness key is gone. (Killing a real one inside its first 0.2 s is a race.)
    with contextlib.closing(redis.Redis.from_url(own_system.env["STELLWERK_REDIS_URL"])) as r:
        r.set(claim_key(f"{ready['id']}:1"), "ghost@lost-attempts")
    worker(own_system, "third")  # it finds attempt 1 claimed and skips it
    try:
        run = wait_run(own_api, job["run_id"], timeout_s=40)
    finally:
        own_system.stop("third")
    assert run["state"] == "COMPLETED"
    assert tasks_by_name(run)["nap"]["attempt"] == 2


def test_a_killed_workers_shell_process_dies_with_it(
    own_system: System, own_api: httpx.Client, tmp_path: Path,
) -> None:
    record = tmp_path / "executions"
    worker(own_system, "fifth", "shell")
    job = submit(own_api, {"name": "killed-shell", "tasks": [recording_task(record, 60)]})
    wait_for(lambda: task_in(own_api, job["run_id"], "ACTIVE") and record.exists())
    pid = int(record.read_text().split()[0])
    assert psutil.pid_exists(pid)
    own_system.stop("fifth", kill=True)
    wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie",
             timeout_s=5)
    own_api.post(f"/runs/{job['run_id']}/cancel")


def test_redis_losing_its_data_does_not_run_an_attempt_twice(
    own_system: System, own_api: httpx.Client, tmp_path: Path,
) -> None:
    """The worker claims its attempt again; the engine's repair dispatches nothing again."""
    record = tmp_path / "executions"
    worker(own_system, "sixth", "shell")
    try:
        job = submit(own_api, {"name": "redis-flushed", "tasks": [recording_task(record, 8)]})
        active = wait_for(lambda: task_in(own_api, job["run_id"], "ACTIVE"))
        key = claim_key(f"{active['id']}:1")
        repairs = repair_count(own_system)
        with contextlib.closing(redis.Redis.from_url(own_system.env["STELLWERK_REDIS_URL"])) as r:
            r.flushdb()  # as a Redis restarted empty
            wait_for(lambda: r.get(key) == b"sixth@lost-attempts", timeout_s=10)
        wait_for(lambda: repair_count(own_system) > repairs, timeout_s=15)  # it looked
        run = wait_run(own_api, job["run_id"], timeout_s=40)
    finally:
        own_system.stop("sixth")
    assert run["state"] == "COMPLETED"
    assert tasks_by_name(run)["nap"]["attempt"] == 1
    assert len(record.read_text().splitlines()) == 1  # executed once


def repair_count(system: System) -> int:
    """How many repairs the engine has logged (one at start, one per new Redis epoch)."""
    return (system.logs / "engine.log").read_text(errors="replace").count(" repair: ")
