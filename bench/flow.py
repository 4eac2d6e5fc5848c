"""Flow control's cost and fairness (issue 16), on real processes.

One invocation, engine, beat and one worker of ``noop`` tasks (threads x 8) on the same
servers:
  (a) a fan-out of N ``noop`` tasks with no limit;
  (b) the same fan-out with ``concurrency: [{key, limit: 50}]`` on every task;
  each fan-out starts from fresh planner statistics and a checkpoint (``Bench.analyze``);
  pairs of (a) and (b) alternate (after an untimed pair a fifth their size), and the
  ratio b/a of their tasks/s is printed with the engine's CPU per task of each (the
  difference is the cost of the limit check), how busy the machine was, and each
  fan-out's front (submit to first start) and steady rate (``Phases``);
  (c) fairness: tenant A submits a fan-out of 5,000 tasks on a key limited to 50, and
  once the first of them has started (A's backlog waits), tenant B 20 tasks on the same
  key: B's start waits (from its submit) p50/p99, and how much of A's backlog had
  started when B's last task started (target: under half).

    .venv/bin/python bench/flow.py [--tasks 10000] [--pairs 2] [--limit 50]

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import percentile, servers, wait_for  # noqa: E402
from bench.pg_activity import server_cpu_s  # noqa: E402
from bench.processes import Processes, start_stellwerk  # noqa: E402
from common.domain.spec import JobSpec  # noqa: E402
from common.messaging.publisher import Publisher  # noqa: E402
from common.persistence.db import make_engine, make_sessions  # noqa: E402
from common.persistence.outbox import OutboxRelay  # noqa: E402
from scheduler.services.jobs import create_job  # noqa: E402


def fan_spec(n: int, tenant: str = "", **flow: Any) -> JobSpec:
    tasks: list[dict[str, Any]] = [
        {"name": "start", "type": "noop", "next": [f"t{i}" for i in range(n)]}]
    tasks += [{"name": f"t{i}", "type": "noop", "next": ["join"], **flow} for i in range(n)]
    tasks.append({"name": "join", "type": "noop"})
    name = f"fan-{n}-{uuid.uuid4().hex[:6]}"
    return JobSpec.model_validate({"name": name, "tenant": tenant, "tasks": tasks})


class Bench:
    """Submits jobs and watches their runs on the benchmark's servers."""

    def __init__(self, database_url: str, redis_url: str) -> None:
        self.database_url = database_url
        self.sessions = make_sessions(make_engine(database_url))
        self.relay = OutboxRelay(self.sessions, Publisher(redis.Redis.from_url(redis_url)))

    def submit(self, spec: JobSpec) -> uuid.UUID:
        with self.sessions.begin() as session:
            created = create_job(session, spec, datetime.now(UTC))
        self.relay.relay_ids(created.outbox_ids)
        assert created.run_id is not None
        return created.run_id

    def wait(self, run_id: uuid.UUID, timeout_s: float) -> None:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            def done() -> bool:
                row = conn.execute("select state from runs where id = %s", (run_id,)).fetchone()
                if row and row[0] in ("FAILED", "CANCELED", "TIMEOUT"):
                    raise RuntimeError(f"run ended {row[0]}")
                return bool(row and row[0] == "COMPLETED")

            wait_for(done, timeout_s, f"run {run_id} did not complete")

    def wait_started(self, run_id: uuid.UUID, timeout_s: float) -> None:
        """Wait until one of the fan-out's tasks has started: its backlog is then waiting."""
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            def started() -> bool:
                row = conn.execute("select 1 from task_runs where run_id = %s and name like "
                                   "'t%%' and started_at is not null limit 1", (run_id,))
                return row.fetchone() is not None

            wait_for(started, timeout_s, f"run {run_id} started nothing")

    def analyze(self) -> None:
        """Clear dead rows and bring the planner's statistics up to date, as autovacuum
        does on a live database (and may not here: a server of this workplace runs with
        ``autovacuum = off``, and each fan-out leaves 10,000 dead flow rows behind).

        The benchmark's tables grow from empty by 10,000 rows every few seconds, faster
        than autovacuum looks (once a minute). Without this, PostgreSQL plans the engine's
        update of a few task runs by id as a scan of the whole table it still believes
        small: a cost that grows with every fan-out and falls on the limited fan-out's
        hundreds of small batches (same code: ratio 0.64 in the first pair, 0.49 in the
        second). Both fan-outs of a pair start from fresh statistics.

        Then a checkpoint, so that each fan-out starts at the same point of PostgreSQL's
        checkpoint cycle. A fan-out of 10,000 writes some 60 MB of WAL, so on this
        workplace's servers (``max_wal_size`` 1 GB) a checkpoint began every eight or
        nine fan-outs, and the fan-outs just after it paid the full-page images of every
        page they touched first: one side or the other, by chance, and a pair's ratio
        ran from 0.62 to 1.11 with the same code.
        """
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")

    def starts(self, run_id: uuid.UUID) -> list[datetime]:
        with psycopg.connect(self.database_url) as conn:
            rows = conn.execute("select started_at from task_runs where run_id = %s "
                                "and name like 't%%' order by started_at", (run_id,))
            return [row[0] for row in rows]


@dataclass(frozen=True)
class FanOut:
    """One fan-out run: tasks/s, CPU ms a task of each process, how busy the machine was,
    and its two parts (``Phases``)."""

    rate: float
    cpu_ms: dict[str, float]
    busy: float
    phases: Phases

    @property
    def engine_ms(self) -> float:
        return self.cpu_ms["engine"]

    def machine_ms(self) -> float:
        """CPU ms a task of all the processes measured together."""
        return sum(self.cpu_ms.values())

    def shares(self) -> str:
        return ", ".join(f"{name} {ms:.2f}" for name, ms in self.cpu_ms.items())


@dataclass(frozen=True)
class Phases:
    """A fan-out's front (from the submit to its first wide task's start: the submit, the
    run's activation, the batch that readies them all) and its steady state (the starts
    between the tenth and ninetieth percentile, a second)."""

    front_s: float
    steady_rate: float

    @classmethod
    def of(cls, submitted: datetime, starts: list[datetime]) -> Phases:
        low, high = len(starts) // 10, 9 * len(starts) // 10
        span_s = (starts[high] - starts[low]).total_seconds()
        steady = (high - low) / span_s if span_s > 0 else 0.0
        return cls((starts[0] - submitted).total_seconds(), steady)

    def __str__(self) -> str:
        return f"front {self.front_s:.2f} s, steady {self.steady_rate:.0f} tasks/s"


def fan_out(bench: Bench, procs: Processes, spec: JobSpec) -> FanOut:
    """Run one fan-out job from its submit to its end, on fresh planner statistics."""
    n = len(spec.tasks)
    bench.analyze()
    before = {**procs.cpu_seconds(), **server_cpu_s()}
    machine = psutil.cpu_times()
    submitted = datetime.now(UTC)
    start = time.perf_counter()
    run_id = bench.submit(spec)
    bench.wait(run_id, 1800)
    elapsed = time.perf_counter() - start
    after = {**procs.cpu_seconds(), **server_cpu_s()}
    return FanOut(n / elapsed, {name: 1000 * (after[name] - before[name]) / n
                                for name in before}, busy_since(machine),
                  Phases.of(submitted, bench.starts(run_id)))


def busy_since(before: Any) -> float:
    """The share of all cores busy since ``before`` (``psutil.cpu_times()``), in percent."""
    now = psutil.cpu_times()
    idle = now.idle - before.idle
    total = sum(now) - sum(before)
    return 100 * (1 - idle / total) if total > 0 else 0.0


def fairness(bench: Bench, limit: int) -> None:
    key = f"shared-{uuid.uuid4().hex[:6]}"
    flow = {"concurrency": [{"key": key, "limit": limit}]}
    big = bench.submit(fan_spec(5000, "tenant-a", **flow))
    # B comes when A's backlog is waiting: a fixed second was a backlog half drained
    # already on a fast machine (3,549 of A's 5,000 started when B's last did).
    bench.wait_started(big, 60)
    submitted = datetime.now(UTC)
    small = bench.submit(fan_spec(20, "tenant-b", **flow))
    bench.wait(small, 600)
    b_starts = bench.starts(small)
    last_b = max(b_starts)
    a_starts = [at for at in bench.starts(big) if at is not None]
    a_started = sum(1 for at in a_starts if at <= last_b)
    a_before = sum(1 for at in a_starts if at <= submitted)
    waits = [(at - submitted).total_seconds() * 1000 for at in b_starts]
    bench.wait(big, 1800)
    print(f"fairness: tenant B's 20 tasks started {percentile(waits, 0.5):.0f} ms (p50) / "
          f"{percentile(waits, 0.99):.0f} ms (p99) after their submit; tenant A had "
          f"{a_started} of 5000 started by then ({100 * a_started / 5000:.1f}%, target < 50%; "
          f"{a_before} when B was submitted)")


def summary(rates: list[tuple[float, float]]) -> str:
    """The pairs' ratios and their median, and the ratio of each side's median.

    A pair's ratio carries the noise of both its runs (here the unlimited fan-out's
    tasks/s varied by a third between pairs, its front by 1.3 s); each side's median
    first sheds a slow or fast run of its own. Both are printed: neither is the rule.
    """
    ratios = [limited / free for free, limited in rates]
    free_median = statistics.median(free for free, _ in rates)
    limited_median = statistics.median(limited for _, limited in rates)
    return (f"ratios: {', '.join(f'{r:.2f}' for r in ratios)}; median "
            f"{statistics.median(ratios):.2f}; medians of each side: no limit "
            f"{free_median:.0f}, limit {limited_median:.0f} tasks/s, ratio "
            f"{limited_median / free_median:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=50)
    args = parser.parse_args()
    with servers() as (database_url, redis_url), Processes() as procs:
        redis.Redis.from_url(redis_url).flushdb()
        start_stellwerk(procs, database_url, redis_url)
        bench = Bench(database_url, redis_url)
        # Warm-up, untimed: the first large fan-out of a process pays for its caches and
        # prepared statements, which made the first pair's ratio 0.70-0.84 where the
        # next ones gave 0.50-0.60.
        warm_up: list[dict[str, Any]] = [{}, {"concurrency": [{"key": "warm-up",
                                                                "limit": args.limit}]}]
        for flow in warm_up:
            bench.wait(bench.submit(fan_spec(args.tasks // 5, "", **flow)), 600)
        print(f"load average {os.getloadavg()[0]:.2f} before the first pair")
        rates: list[tuple[float, float]] = []
        for pair in range(args.pairs):
            free = fan_out(bench, procs, fan_spec(args.tasks))
            key = f"bench-{uuid.uuid4().hex[:6]}"
            limited = fan_out(bench, procs, fan_spec(
                args.tasks, concurrency=[{"key": key, "limit": args.limit}]))
            rates.append((free.rate, limited.rate))
            print(f"  CPU ms a task: no limit {free.shares()} (sum {free.machine_ms():.2f}); "
                  f"limit {limited.shares()} (sum {limited.machine_ms():.2f})")
            print(f"  no limit: {free.phases}; limit {args.limit}: {limited.phases}")
            print(f"pair {pair + 1}: no limit {free.rate:.0f} tasks/s (engine "
                  f"{free.engine_ms:.2f} ms CPU a task, machine {free.busy:.0f}% busy), "
                  f"limit {args.limit}: {limited.rate:.0f} tasks/s (engine "
                  f"{limited.engine_ms:.2f} ms, machine {limited.busy:.0f}% busy); ratio "
                  f"{limited.rate / free.rate:.2f} (target >= 0.8); limit check "
                  f"{limited.engine_ms - free.engine_ms:+.2f} ms engine CPU a task")
        if rates:
            print(summary(rates))
        fairness(bench, args.limit)


if __name__ == "__main__":
    main()
