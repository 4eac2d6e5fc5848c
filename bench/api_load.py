"""Load check of one ``stellwerk api`` process: many clients creating and reading jobs.

``--clients`` concurrent clients (200) each loop for ``--seconds`` (30): create a job
(draft, so that nothing runs and only the API and PostgreSQL are measured), read it
back, list a page of jobs. Every response must be the expected 2xx; the latency of
each request kind is reported as p50/p99, with the CPU the API and this load generator
used.

The clients are aiohttp's: httpx's pool costs about 12 ms of CPU per request at 200
connections, so the generator took a whole core of the two and measured itself (and
its stalls let the server close idle connections under it: the one ReadError seen).

    .venv/bin/python bench/api_load.py [--clients 200] [--seconds 30] [--workers 1]
        [--mix mix|read|poll|runs|create]

``--workers`` is the API's (``stellwerk api --workers N``: N processes; 0 one per core).
``--mix read`` has every client read one job in a loop (what a read costs, without the
creates and lists beside it); ``--mix poll`` has them poll one run each with its last
``ETag``, as a UI or a CI system waiting for a run does (every answer a 304); ``--mix
runs`` has them list the newest 20 runs across jobs, as the UI's runs page does; ``--mix
create`` has them only create draft jobs (what a create costs, alone).

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import api_healthy, free_port, percentile, servers, wait_for  # noqa: E402
from bench.processes import Processes  # noqa: E402

TOKEN = "bench-admin-token"
JOB = {"name": "load", "draft": True, "tasks": [{"name": "a", "type": "noop", "next": ["b"]},
                                                 {"name": "b", "type": "noop"}]}


def start_api(procs: Processes, database_url: str, redis_url: str, workers: int = 1) -> str:
    """``stellwerk api`` on a free port with the benchmark's admin token; its base URL,
    once it answers."""
    port = free_port()
    env = {**os.environ, "STELLWERK_DATABASE_URL": database_url,
           "STELLWERK_REDIS_URL": redis_url, "STELLWERK_ADMIN_TOKEN": TOKEN}
    # ``--workers`` only when asked: an API from before it (issue 18's start) runs too.
    workers_args = ["--workers", str(workers)] if workers != 1 else []
    procs.start("api", [sys.executable, "-m", "scheduler.cli.main", "api", "--port",
                        str(port), *workers_args], env)
    base = f"http://127.0.0.1:{port}/api/v1"
    wait_for(lambda: api_healthy(base), 60, "the API did not come up", poll_s=0.2)
    return base


class Recorder:
    """Sends requests and keeps each kind's latencies and every unexpected answer."""

    def __init__(self, api: aiohttp.ClientSession, base: str) -> None:
        self.api = api
        self.base = base
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []

    async def call(self, kind: str, method: str, path: str,
                   **kwargs: Any) -> dict[str, object] | None:
        started = time.perf_counter()
        try:
            async with self.api.request(method, self.base + path, **kwargs) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            self.errors.append(f"{kind}: {type(error).__name__}: {error}")
            return None
        self.latencies[kind].append((time.perf_counter() - started) * 1000)
        if response.status >= 300:
            self.errors.append(f"{kind}: {response.status} {text[:200]}")
            return None
        body: dict[str, object] = json.loads(text)
        return body


async def client_loop(recorder: Recorder, until: float) -> None:
    """Create, read, list until ``until``."""
    while time.monotonic() < until:
        # A name of its own: a name names one job of its tenant (issue 17).
        named = {**JOB, "name": f"load-{uuid.uuid4().hex}"}
        created = await recorder.call("create", "POST", "/jobs", json=named)
        if created is not None:
            await recorder.call("read", "GET", f"/jobs/{created['id']}")
        await recorder.call("list", "GET", "/jobs", params={"limit": "20"})


async def create_loop(recorder: Recorder, until: float) -> None:
    """Create draft jobs until ``until`` (``--mix create``: what a create costs, alone)."""
    while time.monotonic() < until:
        await recorder.call("create", "POST", "/jobs",
                            json={**JOB, "name": f"load-{uuid.uuid4().hex}"})


async def read_loop(recorder: Recorder, job_id: str, until: float) -> None:
    """Read one job until ``until`` (``--mix read``: what a read costs, alone)."""
    while time.monotonic() < until:
        await recorder.call("read", "GET", f"/jobs/{job_id}")


async def poll_loop(recorder: Recorder, run_id: str, until: float) -> None:
    """Poll one run with its last ``ETag`` until ``until`` (``--mix poll``: a UI or a CI
    system waiting for a run; the run does not change, so every answer is a 304)."""
    path = f"{recorder.base}/runs/{run_id}"
    async with recorder.api.get(path) as first:
        tag = first.headers["ETag"]
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            async with recorder.api.get(path, headers={"If-None-Match": tag}) as response:
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            recorder.errors.append(f"poll: {type(error).__name__}: {error}")
            continue
        recorder.latencies["poll"].append((time.perf_counter() - started) * 1000)
        if response.status != 304:
            recorder.errors.append(f"poll: {response.status}, not 304")


async def runs_loop(recorder: Recorder, until: float) -> None:
    """List the newest 20 runs across jobs until ``until`` (``--mix runs``)."""
    while time.monotonic() < until:
        await recorder.call("runs", "GET", "/runs", params={"limit": "20"})


def session_of(clients: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=clients),
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=aiohttp.ClientTimeout(total=60))


async def prepare(base: str, mix: str, clients: int) -> list[str]:
    """For ``read``, ``poll`` and ``runs``: a job (a draft) or a run (of a one-off job)
    per client."""
    if mix in ("mix", "create"):
        return []
    async with session_of(clients) as api:
        recorder = Recorder(api, base)
        draft = mix == "read"
        made = await asyncio.gather(*(recorder.call(
            "create", "POST", "/jobs", json={**JOB, "name": f"load-{uuid.uuid4().hex}",
                                             "draft": draft}) for _ in range(clients)))
    if recorder.errors or any(item is None for item in made):
        raise SystemExit(f"could not prepare: {recorder.errors[:3]}")
    return [str(item["id" if draft else "run_id"]) for item in made if item is not None]


async def load(base: str, clients: int, seconds: float, mix: str, ids: list[str]) -> Recorder:
    async with session_of(clients) as api:
        recorder = Recorder(api, base)
        until = time.monotonic() + seconds
        if mix == "read":
            loops = [read_loop(recorder, job_id, until) for job_id in ids]
        elif mix == "poll":
            loops = [poll_loop(recorder, run_id, until) for run_id in ids]
        elif mix == "runs":
            loops = [runs_loop(recorder, until) for _ in ids]
        elif mix == "create":
            loops = [create_loop(recorder, until) for _ in range(clients)]
        else:
            loops = [client_loop(recorder, until) for _ in range(clients)]
        await asyncio.gather(*loops)
    return recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mix", choices=["mix", "read", "poll", "runs", "create"],
                        default="mix",
                        help="mix: create, read, list; read: job reads only; poll: "
                             "conditional reads of an unchanged run (304s); runs: lists "
                             "of the newest 20 runs; create: creates only")
    args = parser.parse_args()
    with servers() as (database_url, redis_url), Processes() as procs:
        base = start_api(procs, database_url, redis_url, args.workers)
        ids = asyncio.run(prepare(base, args.mix, args.clients))
        api_cpu_before, own_before = procs.cpu_seconds()["api"], _own_cpu_s()
        recorder = asyncio.run(load(base, args.clients, args.seconds, args.mix, ids))
        api_cpu, own_cpu = procs.cpu_seconds()["api"] - api_cpu_before, _own_cpu_s() - own_before
    latencies, errors = recorder.latencies, recorder.errors
    total = sum(len(v) for v in latencies.values())
    print(f"{args.clients} clients ({args.mix}) for {args.seconds:g} s against `stellwerk api "
          f"--workers {args.workers}`: "
          f"{total} requests ({total / args.seconds:.0f}/s), {len(errors)} errors")
    print(f"  CPU: api {api_cpu:.1f} s ({api_cpu / max(total, 1) * 1000:.1f} ms a request), "
          f"load generator {own_cpu:.1f} s")
    for kind, values in latencies.items():
        print(f"  {kind:6} {len(values):6} requests, p50 {percentile(values, 0.5):7.1f} ms, "
              f"p99 {percentile(values, 0.99):7.1f} ms")
    for error in errors[:10]:
        print(f"  error: {error}")


def _own_cpu_s() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


if __name__ == "__main__":
    main()
