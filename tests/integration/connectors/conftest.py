"""A real connector process, a local HTTP stub for the outside world, the results queue.

The connector tests claim a Redis database index of their own (as the worker tests
do), so that no other consumer of ``stellwerk.results`` takes their messages.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.conftest import claim_redis_db
from tests.http_stub import HttpStub, http_stub
from tests.integration.workers.conftest import Dispatcher, ResultInbox

ROOT = Path(__file__).resolve().parents[3]
SECRET_KEY = "connector-itest-key"
CALLBACK_BASE = "http://stellwerk.example/api/v1"


@pytest.fixture(scope="module")
def connector_redis_url(redis_url: str) -> Iterator[str]:
    url = claim_redis_db(redis_url)
    yield url
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        client.flushdb()


@pytest.fixture
def connector_redis(connector_redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(connector_redis_url)
    yield client
    client.close()


class ConnectorProcess:
    """``run_connector`` in a subprocess; its output goes to a file shown on failure."""

    def __init__(
        self, url: str, hostname: str, port: int, log: Path,
        egress_allow: str = "127.0.0.0/8,::1",
    ) -> None:
        self.hostname = hostname
        self.port = port
        self.log = log
        env = {
            **os.environ,
            "STELLWERK_REDIS_URL": url,
            "STELLWERK_HEARTBEAT_INTERVAL_S": "0.3",
            "STELLWERK_SECRET_KEY": SECRET_KEY,
            "STELLWERK_CALLBACK_URL": CALLBACK_BASE,
            # The stub services listen on loopback, refused unless allowed.
            "STELLWERK_EGRESS_ALLOW": egress_allow,
            "PYTHONUNBUFFERED": "1",
        }
        code = (
            "from common.config import load_settings\n"
            "from connectors.main import run_connector\n"
            f"run_connector(load_settings(), port={port}, concurrency=50, hostname={hostname!r})\n"
        )
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise AssertionError("the connector did not answer /healthz\n" + self.output())

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def stop(self, timeout_s: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def connector(
    connector_redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConnectorProcess]:
    log = tmp_path_factory.mktemp("connector") / "connector.log"
    process = ConnectorProcess(connector_redis_url, "itest-connector@localhost", free_port(), log)
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stub() -> Iterator[HttpStub]:
    yield from http_stub()


@pytest.fixture
def dispatcher(connector_redis_url: str) -> Dispatcher:
    return Dispatcher(connector_redis_url)


@pytest.fixture
def inbox(connector_redis_url: str) -> Iterator[ResultInbox]:
    results = ResultInbox(connector_redis_url)
    yield results
    results.close()
