"""The parts of ``stellwerk up`` that need no servers: its plan, environment and health wait."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli.errors import CliError
from scheduler.cli.up import (
    UpOptions,
    child_env,
    ensure_port_free,
    plan_children,
    wait_until_healthy,
)

OPTIONS = UpOptions(host="0.0.0.0", port=8181, data_dir=Path("/data/sw"), concurrency=4)


def test_every_component_is_a_child_of_its_own() -> None:
    children = plan_children("/py", {"A": "1"}, OPTIONS)

    assert [c.name for c in children] == [
        "api", "engine", "beat", "notify", "worker", "connector"]
    assert all(c.argv[:3] == ("/py", "-m", "scheduler.cli.main") for c in children)
    assert children[0].argv[3:] == ("api", "--host", "0.0.0.0", "--port", "8181",
                                     "--workers", "0")
    assert children[4].argv[3:] == ("worker", "--types", "noop,sleep,python,shell",
                                    "--concurrency", "4", "--pool", "threads")  # fmt: skip
    assert children[5].argv[3:] == ("connector", "--host", "0.0.0.0", "--port", "8191")
    assert all(c.env == {"A": "1"} for c in children)


def test_children_get_the_servers_the_token_and_the_data_dir() -> None:
    env = child_env({"PATH": "/bin", "STELLWERK_API_URL": "elsewhere"}, "pg://", "redis://",
                    "tok", OPTIONS)  # fmt: skip

    assert env["PATH"] == "/bin"
    assert env["STELLWERK_DATABASE_URL"] == "pg://"
    assert env["STELLWERK_REDIS_URL"] == "redis://"
    assert env["STELLWERK_ADMIN_TOKEN"] == "tok"
    assert env["STELLWERK_DATA_DIR"] == "/data/sw"
    assert env["STELLWERK_API_URL"] == "http://127.0.0.1:8181"
    assert env["STELLWERK_EGRESS_ALLOW"] == "127.0.0.0/8,::1"


def test_the_users_own_egress_allowance_wins() -> None:
    env = child_env({"STELLWERK_EGRESS_ALLOW": "10.0.0.0/8"}, "pg://", "redis://", "tok", OPTIONS)

    assert env["STELLWERK_EGRESS_ALLOW"] == "10.0.0.0/8"


def test_a_wildcard_listen_address_is_shown_as_localhost() -> None:
    assert OPTIONS.ui_url == "http://127.0.0.1:8181/"
    assert OPTIONS.api_base == "http://127.0.0.1:8181/api/v1"
    assert UpOptions("::1", 80, Path(), 1).ui_url == "http://[::1]:80/"


def test_the_connector_listens_ten_ports_above_the_api_unless_told() -> None:
    assert OPTIONS.invoke_url == "http://127.0.0.1:8191/invoke"
    assert UpOptions("127.0.0.1", 65530, Path(), 1).invoke_port == 65520
    assert UpOptions("127.0.0.1", 8080, Path(), 1, connector_port=9000).invoke_port == 9000


def test_health_wait_returns_once_healthz_answers(canned_api: Any) -> None:
    canned_api.reply("GET", "/api/v1/healthz", (503, {}), (503, {}), (200, {"status": "ok"}))

    url = canned_api.url + "/api/v1/healthz"
    assert wait_until_healthy(url, threading.Event(), interval=timedelta(milliseconds=10))
    assert len(canned_api.calls("GET", "/api/v1/healthz")) == 3


def test_health_wait_holds_the_banner_while_a_component_keeps_restarting(
    canned_api: Any, caplog: pytest.LogCaptureFixture
) -> None:
    canned_api.reply("GET", "/api/v1/healthz", *[(200, {"status": "ok"})] * 10)
    settling = [{"worker": 2}, {"worker": 3}, {}]
    ticks = iter(range(100))

    ready = wait_until_healthy(
        canned_api.url + "/api/v1/healthz", threading.Event(), unsettled=lambda: settling.pop(0),
        interval=timedelta(milliseconds=1), patience=timedelta(seconds=1),
        clock=lambda: float(next(ticks)),
    )  # fmt: skip

    assert ready
    assert settling == []
    assert "not ready yet: worker (restarted 3 times; its output above says why)" in caplog.text


def test_health_wait_gives_up_when_asked_to_stop() -> None:
    stop = threading.Event()
    stop.set()
    assert not wait_until_healthy("http://127.0.0.1:9/api/v1/healthz", stop)


def test_the_module_runs_as_a_program_before_the_components_exist() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for command in ("api", "engine", "beat", "notify", "worker", "migrate", "up", "submit"):
        assert command in done.stdout


def test_a_taken_port_is_refused_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CliError, match=f"cannot listen on 127.0.0.1:{port}"):
            ensure_port_free("127.0.0.1", port)
    ensure_port_free("127.0.0.1", port)
