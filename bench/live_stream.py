"""What following a busy run's live stream costs the API (``GET /events?run_id=``).

One invocation: engine, beat, one worker of ``noop`` tasks, the notify runner and one
``stellwerk api`` on the same servers. A fan-out of ``--tasks`` tasks limited to
``--limit`` at once (so that it runs for a while, changing ~1,000 times a second here)
is followed by ``--clients`` clients reading its events as a UI or a CI system does.
Printed: the events each client got a second over a window of the run, the API's CPU
then (a share of a core, and a microsecond figure for each event delivered), how far
behind the stream the events arrived (p50/p99 of the time from the stream entry, whose
id is its time in milliseconds, to its arrival), and, once the run ended, that every
client got every event of it.

Old and new are compared by running this in each checkout, alternating:

    .venv/bin/python bench/live_stream.py [--clients 3] [--tasks 5000] [--limit 20]

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import TOKEN, start_api  # noqa: E402
from bench.harness import percentile, servers, wait_for  # noqa: E402
from bench.processes import Processes, start_stellwerk  # noqa: E402

WARM_UP_S = 4.0
WINDOW_S = 8.0


@dataclass
class Follower:
    """One client of the run's stream: how many events it got, and how late each was."""

    events: int = 0
    lags_ms: list[float] = field(default_factory=list)

    def follow(self, base: str, run_id: str) -> None:
        """Read the run's stream until it ends (after the run's final event)."""
        with httpx.stream("GET", f"{base}/events", params={"run_id": run_id},
                          headers=_auth(), timeout=None) as response:
            for line in response.iter_lines():
                if line.startswith("event:"):
                    self.events += 1
                elif line.startswith("id:"):
                    appended_ms = int(line[3:].strip().split("-")[0])
                    self.lags_ms.append(time.time() * 1000 - appended_ms)


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def fan_out(tasks: int, limit: int) -> dict[str, Any]:
    flow = {"concurrency": [{"key": f"follow-{uuid.uuid4().hex[:6]}", "limit": limit}]}
    return {"name": f"followed-{uuid.uuid4().hex[:6]}", "tasks": [
        {"name": "start", "type": "noop", "next": [f"t{i}" for i in range(tasks)]},
        *({"name": f"t{i}", "type": "noop", **flow} for i in range(tasks))]}


def start_system(procs: Processes, database_url: str, redis_url: str) -> str:
    """Engine, beat, worker, notify runner and API; the API's base URL."""
    start_stellwerk(procs, database_url, redis_url)
    env = {**os.environ, "STELLWERK_DATABASE_URL": database_url,
           "STELLWERK_REDIS_URL": redis_url}
    procs.start("notify", [sys.executable, "-m", "scheduler.cli.main", "notify"], env)
    return start_api(procs, database_url, redis_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--limit", type=int, default=20)
    args = parser.parse_args()
    with servers() as (database_url, redis_url), Processes() as procs:
        base = start_system(procs, database_url, redis_url)
        with httpx.Client(base_url=base, headers=_auth(), timeout=120) as api:
            run_id = api.post("/jobs", json=fan_out(args.tasks, args.limit)).json()["run_id"]
            followers = [Follower() for _ in range(args.clients)]
            threads = [threading.Thread(target=f.follow, args=(base, run_id), daemon=True)
                       for f in followers]
            for thread in threads:
                thread.start()
            time.sleep(WARM_UP_S)
            got = sum(f.events for f in followers)
            api_s, started = procs.cpu_seconds()["api"], time.monotonic()
            time.sleep(WINDOW_S)
            got = sum(f.events for f in followers) - got
            api_s = procs.cpu_seconds()["api"] - api_s
            seconds = time.monotonic() - started
            wait_for(lambda: api.get(f"/runs/{run_id}").json()["state"] == "COMPLETED",
                     600, "the run did not complete", poll_s=0.5)
            for thread in threads:
                thread.join(30)
            expected = len(_events_of_the_run(api, run_id))
        report(args.clients, followers, got / seconds, api_s / seconds, expected)


def _events_of_the_run(api: httpx.Client, run_id: str) -> list[str]:
    """The run's events as a late follower gets them: its replayed history."""
    with api.stream("GET", "/events", params={"run_id": run_id}) as response:
        return [line for line in response.iter_lines() if line.startswith("event:")]


def report(clients: int, followers: list[Follower], events_per_s: float, api_share: float,
           expected: int) -> None:
    lags = [lag for f in followers for lag in f.lags_ms]
    print(f"{clients} clients following a run: {events_per_s / clients:.0f} events/s each; "
          f"API {100 * api_share:.0f}% of a core, "
          f"{1e6 * api_share / max(events_per_s, 1):.0f} µs an event delivered")
    print(f"  lag behind the stream: p50 {percentile(lags, 0.5):.0f} ms, "
          f"p99 {percentile(lags, 0.99):.0f} ms")
    print(f"  events each client got: {[f.events for f in followers]} of the run's {expected}")


if __name__ == "__main__":
    main()
