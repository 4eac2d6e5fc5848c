"""Load check of one ``stellwerk api`` process: many clients creating and reading jobs.

``--clients`` concurrent clients (200) each loop for ``--seconds`` (30): create a job
(draft, so that nothing runs and only the API and PostgreSQL are measured), read it
back, list a page of jobs. Every response must be the expected 2xx; the latency of
each request kind is reported as p50/p99.

    .venv/bin/python bench/api_load.py [--clients 200] [--seconds 30]

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import percentile, servers, wait_for  # noqa: E402
from bench.processes import Processes  # noqa: E402

TOKEN = "bench-admin-token"
JOB = {"name": "load", "draft": True, "tasks": [{"name": "a", "type": "noop", "next": ["b"]},
                                                 {"name": "b", "type": "noop"}]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Recorder:
    """Sends requests and keeps each kind's latencies and every unexpected answer."""

    def __init__(self, api: httpx.AsyncClient) -> None:
        self.api = api
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []

    async def call(self, kind: str, method: str, path: str,
                   **kwargs: object) -> dict[str, object] | None:
        started = time.perf_counter()
        try:
            response = await self.api.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as error:
            self.errors.append(f"{kind}: {type(error).__name__}: {error}")
            return None
        self.latencies[kind].append((time.perf_counter() - started) * 1000)
        if response.status_code >= 300:
            self.errors.append(f"{kind}: {response.status_code} {response.text[:200]}")
            return None
        body: dict[str, object] = response.json()
        return body


async def client_loop(recorder: Recorder, until: float) -> None:
    """Create, read, list until ``until``."""
    while time.monotonic() < until:
        created = await recorder.call("create", "POST", "/jobs", json=JOB)
        if created is not None:
            await recorder.call("read", "GET", f"/jobs/{created['id']}")
        await recorder.call("list", "GET", "/jobs", params={"limit": 20})


async def load(base: str, clients: int, seconds: float) -> Recorder:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits,
                                 timeout=30) as api:
        recorder = Recorder(api)
        until = time.monotonic() + seconds
        await asyncio.gather(*(client_loop(recorder, until) for _ in range(clients)))
    return recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    port = free_port()
    with servers() as (database_url, redis_url), Processes() as procs:
        env = {**os.environ, "STELLWERK_DATABASE_URL": database_url,
               "STELLWERK_REDIS_URL": redis_url, "STELLWERK_ADMIN_TOKEN": TOKEN}
        procs.start("api", [sys.executable, "-m", "scheduler.cli.main", "api", "--port",
                            str(port)], env)
        base = f"http://127.0.0.1:{port}/api/v1"
        wait_for(lambda: _healthy(base), 60, "the API did not come up", poll_s=0.2)
        recorder = asyncio.run(load(base, args.clients, args.seconds))
    latencies, errors = recorder.latencies, recorder.errors
    total = sum(len(v) for v in latencies.values())
    print(f"{args.clients} clients for {args.seconds:g} s against one `stellwerk api`: "
          f"{total} requests ({total / args.seconds:.0f}/s), {len(errors)} errors")
    for kind, values in latencies.items():
        print(f"  {kind:6} {len(values):6} requests, p50 {percentile(values, 0.5):7.1f} ms, "
              f"p99 {percentile(values, 0.99):7.1f} ms")
    for error in errors[:10]:
        print(f"  error: {error}")


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    main()
