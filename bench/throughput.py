"""Throughput of Stellwerk against raw Celery, side by side on the same Redis.

One invocation measures, with the same number of worker processes (one, with the same
pool and concurrency) on the same Redis:
  (a) raw Celery: N no-op tasks sent with ``apply_async``;
  (b) a Celery chord of the same fan-out and a join;
  (c) Stellwerk: one run of an N-task fan-out/fan-in of ``noop`` tasks, every
      transition persisted in PostgreSQL (journal, outbox, task runs);
and prints tasks/s of each, the ratios c/a and c/b, and the step latency (predecessor
finished -> successor started) p50/p99 of a 100-task chain.

    .venv/bin/python bench/throughput.py [--tasks 10000] [--chain 100] [--concurrency 8]
                                         [--engines 1] [--workers 1] [--runs 1]

``--engines 2 --workers 2`` is the scale-out check (issue 18): it also prints each
process's CPU, how often a session waited on a lock (two engines locking one run) and
whether any transition was recorded twice or any task ran twice; every run prints
PostgreSQL's commits and WAL bytes per task, for the capacity model. ``--runs R`` splits
the fan-out into R runs at once, so that two engines have different runs to lock.

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import redis
from celery import Celery, chord

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.celery_baseline import COUNTER, JOINED, QUEUE, make_app  # noqa: E402
from bench.harness import percentile, servers, wait_for  # noqa: E402
from bench.pg_activity import Counters, LockWaits, duplicate_work  # noqa: E402
from bench.processes import Processes, by_component, start_stellwerk  # noqa: E402
from common.domain.spec import JobSpec  # noqa: E402
from common.persistence.db import make_engine, make_sessions  # noqa: E402


def raw_celery(app: Celery, redis_url: str, n: int, concurrency: int, procs: Processes) -> float:
    client = redis.Redis.from_url(redis_url)
    procs.start("celery", [sys.executable, str(ROOT / "bench/celery_baseline.py"), redis_url,
                           str(concurrency)])
    client.delete(COUNTER)
    app.send_task("bench.noop", queue=QUEUE)
    wait_for(lambda: client.get(COUNTER) == b"1", 60, "celery worker did not start")
    client.delete(COUNTER)
    before = procs.cpu_seconds()
    start = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for _ in range(n):
            app.send_task("bench.noop", queue=QUEUE, producer=producer)
    wait_for(lambda: int(client.get(COUNTER) or 0) >= n, 600, "raw celery did not finish")
    elapsed = time.perf_counter() - start
    cpu = procs.cpu_seconds()["celery"] - before["celery"]
    print(f"raw Celery worker: {1000 * cpu / n:.2f} ms CPU per task (wall {elapsed:.1f} s)")
    return n / elapsed


def celery_chord(app: Celery, redis_url: str, n: int) -> float:
    client = redis.Redis.from_url(redis_url)
    client.delete(JOINED)
    member = app.signature("bench.chord_member", queue=QUEUE)
    join = app.signature("bench.join", queue=QUEUE)
    start = time.perf_counter()
    chord([member.clone() for _ in range(n)], app=app)(join)
    wait_for(lambda: client.get(JOINED) is not None, 900, "chord did not finish")
    elapsed = time.perf_counter() - start
    # Done with results: close the subscriptions now. Left to the results' __del__ at exit,
    # after the embedded Redis has stopped, they end the run in "Retry limit exceeded".
    consumer = app.backend.result_consumer  # type: ignore[attr-defined]  # not in the stubs
    consumer.stop()
    consumer.subscribed_to.clear()
    return (n + 1) / elapsed


def fan_spec(n: int) -> JobSpec:
    tasks: list[dict[str, Any]] = [
        {"name": "start", "type": "noop", "next": [f"t{i}" for i in range(n)]}]
    tasks += [{"name": f"t{i}", "type": "noop", "next": ["join"]} for i in range(n)]
    tasks.append({"name": "join", "type": "noop"})
    return JobSpec.model_validate({"name": f"fan-{n}-{uuid.uuid4().hex[:6]}", "tasks": tasks})


def chain_spec(n: int) -> JobSpec:
    tasks = [{"name": f"c{i:03d}", "type": "noop", "next": [f"c{i + 1:03d}"] if i < n - 1 else []}
             for i in range(n)]
    return JobSpec.model_validate({"name": f"chain-{n}-{uuid.uuid4().hex[:6]}", "tasks": tasks})


def run_job(database_url: str, redis_url: str, spec: JobSpec,
            timeout_s: float) -> tuple[uuid.UUID, float]:
    """Create the job (its run starts now) and wait for the run to complete."""
    run_ids, elapsed = run_jobs(database_url, redis_url, [spec], timeout_s)
    return run_ids[0], elapsed


def run_jobs(database_url: str, redis_url: str, specs: list[JobSpec],
             timeout_s: float) -> tuple[list[uuid.UUID], float]:
    """Create the jobs (their runs start at once) and wait until every run completed."""
    from common.messaging.publisher import Publisher
    from common.persistence.outbox import OutboxRelay
    from scheduler.services.jobs import create_job

    sessions = make_sessions(make_engine(database_url))
    relay = OutboxRelay(sessions, Publisher(redis.Redis.from_url(redis_url)))
    start = time.perf_counter()
    run_ids = []
    for spec in specs:
        with sessions.begin() as session:
            created = create_job(session, spec, datetime.now(UTC))
        relay.relay_ids(created.outbox_ids)
        assert created.run_id is not None
        run_ids.append(created.run_id)
    with psycopg.connect(database_url) as conn:
        def done() -> bool:
            states = [row[0] for row in conn.execute(
                "select state from runs where id = any(%s)", (run_ids,))]
            conn.commit()
            if failed := set(states) & {"FAILED", "CANCELED", "TIMEOUT"}:
                raise RuntimeError(f"a run ended {failed}")
            return states == ["COMPLETED"] * len(run_ids)

        wait_for(done, timeout_s, f"runs of {specs[0].name}... did not complete")
    return run_ids, time.perf_counter() - start


def step_latencies(database_url: str, run_id: uuid.UUID) -> list[float]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "select started_at, finished_at from task_runs where run_id = %s order by name",
            (run_id,),
        ).fetchall()
    return [(rows[i + 1][0] - rows[i][1]).total_seconds() * 1000 for i in range(len(rows) - 1)]


def stellwerk(database_url: str, redis_url: str, args: argparse.Namespace,
              procs: Processes) -> tuple[float, list[float]]:
    start_stellwerk(procs, database_url, redis_url, args.concurrency,
                    engines=args.engines, workers=args.workers)
    run_job(database_url, redis_url, fan_spec(2), 120)  # warm-up: processes ready, caches primed
    before, pg_before = procs.cpu_seconds(), Counters.read(database_url)
    with LockWaits(database_url) as waits:
        fan_runs, elapsed = run_jobs(database_url, redis_url, [
            fan_spec(args.tasks // args.runs) for _ in range(args.runs)], 1800)
    after, pg_after = procs.cpu_seconds(), Counters.read(database_url)
    print("CPU seconds during the fan-out run: " + ", ".join(
        f"{name} {after[name] - before[name]:.1f}" for name in after) + f" (wall {elapsed:.1f})")
    spent = {name: 1000 * (cpu - by_component(before)[name]) / args.tasks
             for name, cpu in by_component(after).items()}
    print(f"Stellwerk: worker {spent['worker']:.2f} ms, engine {spent['engine']:.2f} ms CPU "
          f"per task (all {args.workers} workers, all {args.engines} engines)")
    print(f"PostgreSQL per task: {pg_after.per(pg_before, args.tasks)}; {waits.summary()}; "
          f"{duplicate_work(database_url, fan_runs)}")
    chain_run, _ = run_job(database_url, redis_url, chain_spec(args.chain), 600)
    return (args.tasks + 2 * args.runs) / elapsed, step_latencies(database_url, chain_run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--engines", type=int, default=1, help="Stellwerk engines")
    parser.add_argument("--workers", type=int, default=1,
                        help="Stellwerk worker processes (raw Celery keeps one)")
    parser.add_argument("--runs", type=int, default=1,
                        help="split Stellwerk's fan-out into this many runs at once")
    args = parser.parse_args()
    with servers() as (database_url, redis_url), Processes() as procs:
        redis.Redis.from_url(redis_url).flushdb()
        app = make_app(redis_url)  # once: its tasks are registered in Celery's shared registry
        a = raw_celery(app, redis_url, args.tasks, args.concurrency, procs)
        b = celery_chord(app, redis_url, args.tasks)
        procs.stop("celery")
        c, steps = stellwerk(database_url, redis_url, args, procs)
    print(f"tasks: {args.tasks}, threads x {args.concurrency} a worker process, same Redis; "
          f"Stellwerk: {args.engines} engine(s), {args.workers} worker(s); Celery: one worker")
    print(f"(a) raw Celery apply_async      {a:9.1f} tasks/s")
    print(f"(b) Celery chord (fan-out+join) {b:9.1f} tasks/s")
    print(f"(c) Stellwerk fan-out/fan-in    {c:9.1f} tasks/s (every transition persisted)")
    print(f"c/a = {c / a:.2f}   c/b = {c / b:.2f}")
    print(f"step latency, {args.chain}-task chain: p50 {percentile(steps, 0.5):.1f} ms, "
          f"p99 {percentile(steps, 0.99):.1f} ms (mean {statistics.mean(steps):.1f} ms)")


if __name__ == "__main__":
    main()
