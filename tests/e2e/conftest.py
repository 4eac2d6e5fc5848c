"""A running Stellwerk for end-to-end tests: real processes, driven over REST.

The processes are started as a user starts them (``stellwerk api``, ``engine``, ``beat``,
``notify``, ``worker``) against the session's PostgreSQL and Redis. Their output goes to
files under the test's temporary directory, printed when a test fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

TERMINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELED"}
ADMIN_TOKEN = "e2e-admin-token"
SECRET_KEY = "e2e-secret-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class System:
    """The processes of one Stellwerk and a client for its API."""

    env: dict[str, str]
    logs: Path
    port: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        out = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli.main", *args],
            env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def stop(self, name: str, kill: bool = False) -> None:
        proc = self.procs.pop(name)
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
        )

    def dump_logs(self) -> str:
        return "\n".join(
            f"--- {p.name} ---\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


def wait_healthy(system: System, deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if httpx.get(f"{system.base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("API did not become healthy\n" + system.dump_logs())


@pytest.fixture(scope="session")
def system(
    settings: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    logs = tmp_path_factory.mktemp("e2e-logs")
    port = free_port()
    env = {
        **os.environ,
        "STELLWERK_DATABASE_URL": settings.database_url,
        "STELLWERK_REDIS_URL": settings.redis_url,
        "STELLWERK_ADMIN_TOKEN": ADMIN_TOKEN,
        "STELLWERK_SECRET_KEY": SECRET_KEY,
        # Where processes point others at the API (the connector's callback URLs).
        "STELLWERK_API_URL": f"http://127.0.0.1:{port}",
        "STELLWERK_DATA_DIR": str(logs / "data"),
        "STELLWERK_LEASE_TTL_S": "5",
        "STELLWERK_HEARTBEAT_INTERVAL_S": "1",
        # Webhook retries after 0.2 s, 0.4 s, ...; a POST may take 3 s (lease: 8 s).
        "STELLWERK_WEBHOOK_RETRY_BASE_S": "0.2",
        "STELLWERK_WEBHOOK_RETRY_MAX_S": "1",
        "STELLWERK_WEBHOOK_MAX_ATTEMPTS": "4",
        "STELLWERK_WEBHOOK_TIMEOUT_S": "3",
        # The tests' receivers and stub services listen on loopback, which the egress
        # policy refuses unless allowed (as ``stellwerk up`` allows it).
        "STELLWERK_EGRESS_ALLOW": "127.0.0.0/8,::1",
        "PYTHONUNBUFFERED": "1",
    }
    sys_ = System(env, logs, port)
    sys_.start("api", "api", "--port", str(sys_.port))
    sys_.start("engine", "engine")
    sys_.start("beat", "beat")
    sys_.start("notify", "notify")
    sys_.start("worker", "worker", "--types", "noop,sleep,python,shell", "--concurrency", "8")
    try:
        wait_healthy(sys_)
        yield sys_
    finally:
        for name in list(sys_.procs):
            sys_.stop(name)


@pytest.fixture
def api(system: System, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    with system.client() as client:
        yield client
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(system.dump_logs())  # noqa: T201


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def submit(api: httpx.Client, spec: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/jobs", json=spec)
    assert response.status_code == 201, response.text
    return dict(response.json())


def wait_run(api: httpx.Client, run_id: str, timeout_s: float = 60) -> dict[str, Any]:
    """Poll the run until it is terminal, at first every 50 ms, then less often.

    A run's representation holds all its tasks (174 kB and ~45 ms of API time for 500
    of them): polling that every 50 ms kept one of the two CI cores busy serving the
    test, and a test measuring the system measured its own polling. The interval grows
    by half each time up to 0.5 s, so a short run is still seen at once.
    """
    end = time.monotonic() + timeout_s
    run: dict[str, Any] = {}
    delay_s = 0.05
    while time.monotonic() < end:
        run = api.get(f"/runs/{run_id}").json()
        if run.get("state") in TERMINAL:
            return run
        time.sleep(delay_s)
        delay_s = min(delay_s * 1.5, 0.5)
    raise AssertionError(f"run {run_id} did not finish: {run}")


def tasks_by_name(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in run["tasks"]}


def journal(api: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """The run's whole journal, every page of it."""
    entries: list[dict[str, Any]] = []
    params: dict[str, str] = {}
    while True:
        response = api.get(f"/runs/{run_id}/journal", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        entries += body["entries"]
        if body["next_cursor"] is None:
            return entries
        params = {"cursor": body["next_cursor"]}


def command(system: System, *args: str) -> list[str]:
    """The CLI with ``args``, pointed at the system's API with the admin token."""
    return [sys.executable, "-m", "scheduler.cli.main", *args, "--api-url",
            system.base.removesuffix("/api/v1"), "--token", ADMIN_TOKEN]


def cli(system: System, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI to its end, as a user at a wide terminal would (whole ids in tables)."""
    env = {**system.env, "COLUMNS": "200"}
    return subprocess.run(command(system, *args), env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def wait_run_until(
    api: httpx.Client, run_id: str, condition: Callable[[dict[str, Any]], bool],
    timeout_s: float = 30,
) -> dict[str, Any]:
    """Poll the run until ``condition`` holds; fail with the last state seen."""
    end = time.monotonic() + timeout_s
    run: dict[str, Any] = {}
    while time.monotonic() < end:
        run = api.get(f"/runs/{run_id}").json()
        if condition(run):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached the condition: {run}")
