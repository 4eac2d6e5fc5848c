"""Retention under a steady load (issue 14): database bytes per finished task run, and the
history's size over time without retention (growing) and with it (flat).

Two arms, one after the other, each on a fresh database with real processes (engine,
beat, one worker of ``noop`` and ``shell`` tasks, threads x 8): ``--jobs`` jobs of four
tasks (three ``noop``, one ``shell`` that prints two lines, so that logs are written
too) get ``--rate`` runs a second between them, round robin, for ``--seconds``.
Without retention the beat runs with ``STELLWERK_RETENTION_DAYS=0``; with it, with
``--retention-s`` seconds (as a fraction of a day: the very setting and code path of
production, only shorter) and ``STELLWERK_RETENTION_KEEP_RUNS=1``.

Every ``--every`` seconds each arm samples ``pg_total_relation_size`` (heap, TOAST and
indexes) summed over the history tables (runs, task runs, journal, task logs, fires),
the consumed message ids (kept a day by their own pruning, so they grow in both arms
during a benchmark) and the whole database.

    .venv/bin/python bench/retention.py [--rate 4] [--seconds 240] [--retention-s 30]

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import servers  # noqa: E402
from bench.processes import Processes  # noqa: E402
from common.domain.spec import JobSpec  # noqa: E402
from common.persistence.db import make_engine, make_sessions  # noqa: E402

HISTORY = ("runs", "task_runs", "journal", "task_logs", "fires")
TASKS_PER_RUN = 4
SAY = [sys.executable, "-c", "print('retention bench: one line'); print('and another')"]


@dataclass
class Sample:
    """One look at an arm's database."""

    at_s: float
    finished_task_runs: int  # every task run that finished so far, deleted or not
    kept_runs: int
    history_bytes: int
    consumed_bytes: int
    database_bytes: int


def make_jobs(database_url: str, count: int) -> list[uuid.UUID]:
    """``count`` jobs of four tasks, made by the service as the API makes them."""
    from scheduler.services.jobs import create_job

    sessions = make_sessions(make_engine(database_url))
    ids = []
    with sessions.begin() as session:
        for n in range(count):
            spec = JobSpec.model_validate({
                "name": f"retention-{n}", "schedule": {"cron": "0 0 1 1 *", "timezone": "UTC"},
                "tasks": [
                    {"name": "say", "type": "shell", "params": {"argv": SAY}, "next": ["a", "b"]},
                    {"name": "a", "type": "noop", "next": ["c"]}, {"name": "b", "type": "noop"},
                    {"name": "c", "type": "noop"},
                ],
            })
            ids.append(create_job(session, spec, datetime.now(UTC)).job_id)
    return ids


def start(procs: Processes, database_url: str, redis_url: str, retention_days: float) -> None:
    """Engine, beat and a worker, with the beat's retention as given (0: off)."""
    env = {**os.environ, "STELLWERK_DATABASE_URL": database_url,
           "STELLWERK_REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1",
           "STELLWERK_RETENTION_DAYS": repr(retention_days), "STELLWERK_RETENTION_KEEP_RUNS": "1"}
    cli = [sys.executable, "-m", "scheduler.cli.main"]
    procs.start("engine", [*cli, "engine"], env)
    procs.start("beat", [*cli, "beat"], env)
    procs.start("worker", [*cli, "worker", "--types", "noop,shell", "--concurrency", "8",
                           "--pool", "threads"], env)


def sample(conn: psycopg.Connection[Any], began: float, runs_made: int) -> Sample:
    """Sizes now; finished task runs = those made minus those not finished yet."""
    sizes = " + ".join(f"pg_total_relation_size('{t}')" for t in HISTORY)
    row = conn.execute(
        f"SELECT {sizes}, pg_total_relation_size('consumed_messages'), "  # noqa: S608
        "pg_database_size(current_database()), "
        "(SELECT count(*) FROM runs), "
        "(SELECT count(*) FROM task_runs WHERE state NOT IN "
        "  ('COMPLETED', 'FAILED', 'TIMEOUT', 'SKIPPED', 'REJECTED', 'CANCELED'))"
    ).fetchone()
    assert row is not None
    history, consumed, database, kept, unfinished = row
    finished = runs_made * TASKS_PER_RUN - int(unfinished)
    return Sample(time.monotonic() - began, finished, int(kept), int(history), int(consumed),
                  int(database))


def arm(args: argparse.Namespace, retention_days: float) -> list[Sample]:
    """One arm: the load for ``--seconds``, sampled every ``--every``."""
    samples: list[Sample] = []
    with servers() as (database_url, redis_url), Processes() as procs:
        jobs = make_jobs(database_url, args.jobs)
        start(procs, database_url, redis_url, retention_days)
        time.sleep(3)  # the processes start (no health endpoint without the API)
        sessions = make_sessions(make_engine(database_url, pool_size=1))
        began = time.monotonic()
        made = 0
        next_sample = 0.0
        with psycopg.connect(database_url, autocommit=True) as conn:
            while (elapsed := time.monotonic() - began) < args.seconds:
                _create(sessions, jobs[made % len(jobs)])
                made += 1
                if elapsed >= next_sample:
                    samples.append(sample(conn, began, made))
                    next_sample += args.every
                time.sleep(max(0.0, began + made / args.rate - time.monotonic()))
            samples.append(sample(conn, began, made))
    return samples


def _create(sessions: Any, job_id: uuid.UUID) -> None:
    """A run due half a second from now: the beat activates it, as it does cron runs."""
    from scheduler.services.runs import create_run

    now = datetime.now(UTC)
    with sessions.begin() as session:
        create_run(session, job_id, "api", now + timedelta(milliseconds=500), now)


def report(off: list[Sample], on: list[Sample], args: argparse.Namespace, load: str) -> None:
    """Side by side: finished task runs, runs kept, history and consumed-id bytes."""
    print(f"{args.jobs} jobs of {TASKS_PER_RUN} tasks, {args.rate} runs/s for {args.seconds} s; "
          f"retention {args.retention_s} s, last run of each job kept; {load}")
    print("| t (s) | finished task runs | off: runs | off: history MB | off: consumed MB "
          "| on: runs | on: history MB | on: consumed MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for a, b in zip(off, on, strict=False):
        print(f"| {a.at_s:.0f} | {a.finished_task_runs} | {a.kept_runs} | "
              f"{a.history_bytes / 1e6:.2f} | {a.consumed_bytes / 1e6:.2f} | {b.kept_runs} | "
              f"{b.history_bytes / 1e6:.2f} | {b.consumed_bytes / 1e6:.2f} |")
    first, last = off[1], off[-1]
    per = (last.history_bytes - first.history_bytes) / max(
        1, last.finished_task_runs - first.finished_task_runs)
    consumed = (last.consumed_bytes - first.consumed_bytes) / max(
        1, last.finished_task_runs - first.finished_task_runs)
    print(f"history bytes per finished task run (retention off, slope): {per:.0f}; "
          f"consumed message ids: {consumed:.0f} more (gone after a day)")
    half = [s.history_bytes for s in on if s.at_s >= args.seconds / 2]
    print(f"retention on, second half: history {min(half) / 1e6:.2f}-{max(half) / 1e6:.2f} MB")


def main() -> None:
    """Both arms, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=4.0, help="runs a second")
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--every", type=float, default=20.0, help="seconds between samples")
    parser.add_argument("--retention-s", type=float, default=30.0)
    args = parser.parse_args()
    psutil.cpu_percent()
    off = arm(args, 0.0)
    on = arm(args, args.retention_s / 86400)
    load = (f"machine {psutil.cpu_percent():.0f}% busy on average ({psutil.cpu_count()} cores), "
            f"load average {os.getloadavg()[0]:.2f}")
    report(off, on, args, load)


if __name__ == "__main__":
    main()
