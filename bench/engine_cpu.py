"""The engine's own CPU a cron fire, by batch size: its fixed cost a batch and a fire.

The engine's batch applier runs in this process on the benchmark's servers: one-task
runs are started and finished in mixed batches, each batch holding the starts of
``k`` runs and the results of the ``k`` before, as the engine takes them at a steady
rate of fires (``bench/scheduler.py``: ~5 fires a batch at 250 a second). Only this
process's CPU is counted, so PostgreSQL's and Redis's are apart, and no other process
competes for the cores: the figure moves by a few percent between runs, where the
engine's share in ``bench/scheduler.py`` moves by fifteen. Run it in two checkouts to
compare commits. It prints, for each ``k``, the CPU a fire (median of the repeats
after a first, untimed), then the straight line through them: ms a batch and ms a fire.

    .venv/bin/python bench/engine_cpu.py [--runs 1000] [--sizes 2,5,12] [--repeats 3]

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import servers  # noqa: E402
from common.domain.spec import JobSpec  # noqa: E402
from common.messaging.messages import Activation, TaskResult  # noqa: E402
from common.messaging.publisher import Publisher  # noqa: E402
from common.persistence.db import make_engine, make_sessions  # noqa: E402
from common.persistence.models import Job  # noqa: E402
from common.persistence.outbox import OutboxRelay  # noqa: E402
from scheduler.engine.batch import BatchApplier  # noqa: E402
from scheduler.engine.flow_gate import FlowGate  # noqa: E402
from scheduler.engine.incoming import Incoming  # noqa: E402
from scheduler.engine.loading import RunLoader  # noqa: E402
from scheduler.engine.structure import StructureCache  # noqa: E402
from scheduler.services.jobs import create_job  # noqa: E402
from scheduler.services.runs import NewRun, create_runs  # noqa: E402

BUNDLE_SIZE = 32  # the engine's default (``dispatch_bundle_size``)
LEASE_TTL = timedelta(seconds=30)


def now() -> datetime:
    return datetime.now(UTC)


class Fires:
    """One-task runs of one job, created by the service and applied by the engine's applier."""

    def __init__(self, database_url: str, redis_url: str) -> None:
        self.database_url = database_url
        # As the engine's (``scheduler.engine.main``): its statements prepared by its pipelines.
        self.sessions = make_sessions(
            make_engine(database_url, pre_ping=False, driver_prepares=False))
        relay = OutboxRelay(self.sessions, Publisher(redis.Redis.from_url(redis_url)),
                            BUNDLE_SIZE)
        self.applier = BatchApplier(self.sessions, RunLoader(StructureCache()), relay,
                                    LEASE_TTL, clock=now, flow=FlowGate())
        spec = JobSpec.model_validate({"name": f"cpu-{uuid.uuid4().hex[:6]}",
                                       "tasks": [{"name": "t", "type": "noop"}]})
        with self.sessions.begin() as session:
            self.job_id = create_job(session, spec, now()).job_id

    def runs(self, n: int) -> dict[uuid.UUID, uuid.UUID]:
        """``n`` new runs (READY, as the beat creates them): run id to task run id."""
        with self.sessions.begin() as session:
            job = session.get(Job, self.job_id)
            assert job is not None
            created = [NewRun(uuid.uuid4(), job, "manual", now()) for _ in range(n)]
            create_runs(session, created, now())
        ids = [run.id for run in created]
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            rows = conn.execute("SELECT run_id, id FROM task_runs WHERE run_id = ANY(%s)",
                                (ids,)).fetchall()
            conn.execute("ANALYZE")
        tasks: dict[uuid.UUID, uuid.UUID] = {run_id: task_run_id for run_id, task_run_id in rows}
        return {run_id: tasks[run_id] for run_id in ids}

    def cpu_ms_a_fire(self, n: int, per_batch: int) -> float:
        """Start and finish ``n`` runs, ``per_batch`` of each a batch; CPU ms a fire."""
        tasks = self.runs(n)
        order = list(tasks)
        spent_s = 0.0
        for at in range(0, n + per_batch, per_batch):
            messages: list[Activation | TaskResult] = [
                Activation(run_id=run_id) for run_id in order[at:at + per_batch]]
            messages += [TaskResult(task_run_id=tasks[run_id], run_id=run_id, attempt=1,
                                    kind="finished", outcome="COMPLETED", worker="w1",
                                    started_at=now())
                         for run_id in order[max(0, at - per_batch):at]]
            started = time.process_time()
            self.applier.apply([Incoming(m.message_id, m.run_id, m) for m in messages])
            spent_s += time.process_time() - started
        self.check_completed(order)
        return 1000 * spent_s / n

    def check_completed(self, run_ids: list[uuid.UUID]) -> None:
        with psycopg.connect(self.database_url) as conn:
            row = conn.execute("SELECT count(*) FROM runs WHERE id = ANY(%s) "
                               "AND state = 'COMPLETED'", (run_ids,)).fetchone()
        if row is None or row[0] != len(run_ids):
            raise SystemExit(f"{row[0] if row else 0} of {len(run_ids)} runs completed")


def line(points: dict[int, float]) -> tuple[float, float]:
    """Least squares of CPU a fire against 1/k: (ms a batch, ms a fire)."""
    xs, ys = [1 / k for k in points], list(points.values())
    slope, intercept = statistics.linear_regression(xs, ys)
    return slope, intercept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sizes", default="2,5,12", help="fires a batch, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with servers() as (database_url, redis_url):
        redis.Redis.from_url(redis_url).flushdb()
        fires = Fires(database_url, redis_url)
        fires.cpu_ms_a_fire(args.runs // 2, sizes[0])  # warm-up: caches, prepared statements
        medians = {}
        for per_batch in sizes:
            figures = [fires.cpu_ms_a_fire(args.runs, per_batch) for _ in range(args.repeats)]
            medians[per_batch] = statistics.median(figures)
            print(f"{per_batch:3} fires a batch: engine CPU {medians[per_batch]:.3f} ms a fire "
                  f"({', '.join(f'{f:.3f}' for f in figures)})")
    if len(medians) > 1:
        batch_ms, fire_ms = line(medians)
        print(f"fit: {batch_ms:.2f} ms a batch + {fire_ms:.2f} ms a fire")


if __name__ == "__main__":
    main()
