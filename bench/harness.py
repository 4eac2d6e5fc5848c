"""What the benchmarks share: servers in a scratch database, waiting, percentiles, the
API's health check."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from tempfile import mkdtemp

import httpx
import psycopg

from common.persistence.migrate import upgrade


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str,
              poll_s: float = 0.01) -> None:
    """Poll ``condition`` until it holds; ``TimeoutError`` naming ``what`` after the timeout."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(poll_s)


@contextmanager
def servers() -> Iterator[tuple[str, str]]:
    """A migrated scratch database and a Redis URL, from the environment or embedded."""
    db, rd = os.environ.get("STELLWERK_BENCH_DATABASE_URL"), os.environ.get(
        "STELLWERK_BENCH_REDIS_URL")
    with ExitStack() as stack:
        if not (db and rd):
            from common.embedded import EmbeddedServers

            emb = stack.enter_context(EmbeddedServers(Path(mkdtemp(prefix="stellwerk-bench-"))))
            db, rd = db or emb.database_url, rd or emb.redis_url
        name = f"stellwerk_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        info = psycopg.conninfo.conninfo_to_dict(db)
        info["dbname"] = name
        url = "postgresql://?" + "&".join(f"{k}={v}" for k, v in info.items() if v is not None)
        upgrade(url)
        try:
            yield url, rd
        finally:
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    """A TCP port on the loopback interface that the kernel considers free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def api_healthy(base: str, timeout_s: float = 1.0) -> bool:
    """Whether the API at ``base`` (``.../api/v1``) answers its health check with 200."""
    try:
        return httpx.get(f"{base}/healthz", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False
