"""The embedded servers: reuse of live servers, ownership, and clean stops."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from common.embedded import (
    EmbeddedServers,
    launch_redis,
    start_redis,
    stop_postgres,
    stop_redis,
)

# Deeper than a unix socket path may be (107 bytes), as a data dir inside a project can be.
DEEP = "a-data-directory-nested-deep-enough-that-its-socket-path-would-be-too-long/" * 2


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory whose servers are stopped after the test, whatever happened.

    Outside pytest's basetemp, whose permissions other pytest sessions reset (see
    ``tests/conftest.py``).
    """
    with tempfile.TemporaryDirectory(prefix="stellwerk-test-", ignore_cleanup_errors=True) as tmp:
        directory = Path(tmp) / DEEP / ".stellwerk"
        try:
            yield directory
        finally:
            stop_redis(directory / "redis")
            stop_postgres(directory / "pg")


def test_second_start_reuses_the_live_redis(data_dir: Path) -> None:
    first = start_redis(data_dir / "redis")
    _redis(first).set("key", "kept")
    pid = _pid(data_dir / "redis" / "redis.pid")

    second = start_redis(data_dir / "redis")

    assert second == first
    assert _redis(second).get("key") == b"kept"
    assert _pid(data_dir / "redis" / "redis.pid") == pid


def test_redis_keeps_its_port_and_data_across_a_restart(data_dir: Path) -> None:
    first = start_redis(data_dir / "redis")
    _redis(first).set("key", "kept")
    pid = _pid(data_dir / "redis" / "redis.pid")
    stop_redis(data_dir / "redis")
    assert not _alive(pid)

    second = start_redis(data_dir / "redis")

    assert second == first
    assert _redis(second).get("key") == b"kept"


def test_a_live_redis_on_another_port_is_an_error(data_dir: Path) -> None:
    url = start_redis(data_dir / "redis")
    port = int(url.rsplit(":", 1)[1].split("/")[0])

    with pytest.raises(RuntimeError, match="already runs"):
        start_redis(data_dir / "redis", port + 1)


def test_embedded_servers_start_and_stop_both(data_dir: Path) -> None:
    with EmbeddedServers(data_dir) as servers:
        with psycopg.connect(servers.database_url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("stellwerk",)
        assert _redis(servers.redis_url).ping()
        pids = [_pid(data_dir / "pg" / "postmaster.pid"), _pid(data_dir / "redis" / "redis.pid")]
        assert all(_alive(pid) for pid in pids)

    assert not any(_alive(pid) for pid in pids)


def test_an_orphaned_server_is_adopted_and_stopped(data_dir: Path) -> None:
    launch = launch_redis(data_dir / "redis", keep_running=True)  # as if its owner crashed
    assert not launch.owned
    pid = _pid(data_dir / "redis" / "redis.pid")

    with EmbeddedServers(data_dir, database_url="postgresql://unused/x") as servers:
        assert servers.redis_url == launch.url

    assert not _alive(pid)


def test_a_server_with_a_live_owner_is_left_running(data_dir: Path) -> None:
    url = start_redis(data_dir / "redis")  # this test process owns it
    pid = _pid(data_dir / "redis" / "redis.pid")

    attached = _run_python(
        "from pathlib import Path; from common.embedded import launch_redis;"
        f"print(launch_redis(Path({str(data_dir / 'redis')!r})).owned)"
    )

    assert attached == "False"
    assert _alive(pid)
    assert _redis(url).ping()


def test_ensure_servers_stops_what_it_started_when_the_process_exits(data_dir: Path) -> None:
    urls = _run_python(
        "from common.config import load_settings; from common.embedded import ensure_servers;"
        "s = ensure_servers(load_settings()); print(s.database_url, s.redis_url)",
        STELLWERK_DATA_DIR=str(data_dir),
    )

    database_url, redis_url = urls.split()
    assert database_url.startswith("postgresql://postgres:@/stellwerk?host=")
    assert redis_url.startswith("redis://127.0.0.1:")
    assert not (data_dir / "pg" / "postmaster.pid").exists()
    assert not _process_running(data_dir / "redis" / "redis.pid")


def _run_python(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter without server URLs; return its stdout."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("STELLWERK_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def _pid(path: Path) -> int:
    return int(path.read_text().split()[0])


def _process_running(pid_file: Path) -> bool:
    return pid_file.exists() and _alive(_pid(pid_file))


def _alive(pid: int) -> bool:
    """A zombie counts as gone: the daemons' parent is init, which reaps when it likes."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
