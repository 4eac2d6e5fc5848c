"""``stellwerk up`` as a user runs it: start, run a job, Ctrl-C, start again on the same data.

A real ``stellwerk up`` process with its embedded PostgreSQL and Redis under a temporary
data dir, driven over the REST API with the admin token it stored there, and with the
CLI as the README's quick start does (``submit examples/first-job.yaml --watch``,
``show``), from the directory whose ``.stellwerk`` holds the token.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

READY_TIMEOUT_S = 90.0
RUN_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0
WATCH_TIMEOUT_S = 120.0
NOOP_JOB = {"name": "e2e-up-noop", "tasks": [{"name": "only", "type": "noop"}]}


def http_job(url: str) -> dict[str, Any]:
    """One ``http`` task: served by the connector that ``up`` starts (issue 14)."""
    return {"name": "e2e-up-http", "tasks": [{"name": "ping", "type": "http",
                                              "params": {"url": url}}]}


class Up:
    """One ``stellwerk up`` process; its output goes to a log file shown on failure."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.api = f"http://127.0.0.1:{self.port}/api/v1"
        self.log = log
        # Nothing from the developer's environment: embedded servers, generated token.
        env = {k: v for k, v in os.environ.items() if not k.startswith("STELLWERK_")}
        argv = [sys.executable, "-m", "scheduler.cli.main", "up", "--data-dir", str(data_dir)]
        argv += ["--port", str(self.port), "--connector-port", str(_free_port()),
                 "--concurrency", "4"]
        with log.open("ab") as out:
            self.process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def wait_healthy(self) -> None:
        def healthy() -> bool:
            if self.process.poll() is not None:
                pytest.fail(f"stellwerk up exited with {self.process.returncode}:\n{self.output()}")
            try:
                return httpx.get(f"{self.api}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _await(healthy, READY_TIMEOUT_S, "GET /healthz", self.output)

    def client(self) -> httpx.Client:
        token = (self.data_dir / "admin-token").read_text().strip()
        return httpx.Client(
            base_url=self.api, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    def interrupt(self) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"stellwerk up did not exit within {EXIT_TIMEOUT_S} s:\n{self.output()}")

    def kill(self) -> None:
        """Kill ``up`` and what it started: a SIGKILLed ``up`` stops none of its children
        (a failed test left its API and connector serving)."""
        if self.process.poll() is not None:
            return
        children = psutil.Process(self.process.pid).children(recursive=True)
        self.process.kill()
        self.process.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(children, timeout=EXIT_TIMEOUT_S)


@pytest.fixture
def start_up(tmp_path: Path) -> Iterator[Callable[[], Up]]:
    """Starts ``stellwerk up`` on one data dir; kills whatever is left at the end."""
    started: list[Up] = []

    def start() -> Up:
        up = Up(tmp_path / ".stellwerk", tmp_path / "up.log")
        started.append(up)
        return up

    yield start
    for up in started:
        up.kill()
    for process in _servers_under(tmp_path / ".stellwerk"):
        process.kill()


def test_up_runs_a_job_stops_cleanly_and_keeps_its_data(
    start_up: Callable[[], Up], tmp_path: Path
) -> None:
    up = start_up()
    up.wait_healthy()
    with up.client() as api:
        created = api.post("/jobs", json=NOOP_JOB)
        assert created.status_code == 201, created.text
        job = created.json()
        _await_run_completed(api, job["run_id"], up.output)
        # An http task (its own API's health) runs too: up serves every built-in type.
        pinged = api.post("/jobs", json=http_job(f"{up.api}/healthz"))
        assert pinged.status_code == 201, pinged.text
        assert pinged.json()["warnings"] == []
        _await_run_completed(api, pinged.json()["run_id"], up.output)
    _follow_the_readme(up, tmp_path)

    assert up.interrupt() == 0, up.output()
    _await(lambda: not _servers_under(up.data_dir), 10.0, "the embedded servers to stop", up.output)
    assert not (up.data_dir / "api-url").exists(), "a stopped up still says where it serves"

    again = start_up()
    again.wait_healthy()
    with again.client() as api:
        listed = api.get("/jobs", params={"limit": 100})
        assert listed.status_code == 200, listed.text
        assert job["id"] in [j["id"] for j in listed.json()["data"]]
    assert again.interrupt() == 0, again.output()


def _follow_the_readme(up: Up, cwd: Path) -> None:
    """``stellwerk submit examples/first-job.yaml --watch``, ``stellwerk show RUN``, curl.

    Run in ``cwd``, beside the ``.stellwerk`` data dir, with nothing set: the CLI finds
    the server (``up`` runs on a free port, not 8080) and the admin token as the README
    says, and so does its curl example. ``up`` printed the Redis URL producers need.
    """
    assert re.search(r"Redis +redis://127\.0\.0\.1:\d+/0", up.output()), up.output()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STELLWERK_")}
    _curl_as_the_readme_does(cwd, env)
    cli = [sys.executable, "-m", "scheduler.cli.main"]
    watched = subprocess.run(
        [*cli, "submit", str(ROOT / "examples" / "first-job.yaml"), "--watch"], cwd=cwd,
        env=env, capture_output=True, text=True, timeout=WATCH_TIMEOUT_S, check=False,
    )
    assert watched.returncode == 0, f"{watched.stdout}{watched.stderr}\n{up.output()}"
    run_id = next(line.split()[1] for line in watched.stdout.splitlines()
                  if line.startswith("run "))
    shown = subprocess.run([*cli, "show", run_id], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=30, check=False)
    assert shown.returncode == 0, f"{shown.stderr}\n{up.output()}"
    assert "COMPLETED" in shown.stdout
    for task in ("prepare", "fetch-a", "fetch-b", "combine"):
        assert task in shown.stdout, shown.stdout


def _curl_as_the_readme_does(cwd: Path, env: dict[str, str]) -> None:
    """The README's first REST example, its shell lines taken from the README itself."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```sh\nTOKEN=$(cat .stellwerk/admin-token)", 1)[1].split("```", 1)[0]
    if shutil.which("curl") is None:
        pytest.skip("no curl on this machine")
    made = subprocess.run(["bash", "-c", "TOKEN=$(cat .stellwerk/admin-token)" + block],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert made.returncode == 0 and '"name":"hello"' in made.stdout.replace(" ", ""), (
        made.stdout + made.stderr)


def _await_run_completed(api: httpx.Client, run_id: str, output: Callable[[], str]) -> None:
    last: dict[str, Any] = {}

    def completed() -> bool:
        nonlocal last
        last = api.get(f"/runs/{run_id}").json()
        if last.get("state") in ("FAILED", "TIMEOUT", "CANCELED"):
            pytest.fail(f"run ended {last['state']}: {last}")
        return last.get("state") == "COMPLETED"

    _await(completed, RUN_TIMEOUT_S, f"run {run_id} to complete", lambda: f"{last}\n{output()}")


def _servers_under(data_dir: Path) -> list[psutil.Process]:
    """Live ``postgres`` / ``redis-server`` processes working in or named after ``data_dir``."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "cwd", "status"]):
        info = process.info
        if info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if not str(info["name"] or "").startswith(("postgres", "redis-server")):
            continue
        places = [info["cwd"] or "", *(info["cmdline"] or [])]
        if any(str(data_dir) in place for place in places):
            found.append(process)
    return found


def _await(
    condition: Callable[[], bool], timeout_s: float, what: str, context: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}:\n{context()}")
        time.sleep(0.25)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
