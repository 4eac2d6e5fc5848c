"""Cron firing under load: lateness with 1,000 and with 100,000 enabled cron jobs, a burst.

One invocation, real processes (engine, beat, one worker of ``noop`` tasks, threads x 8)
on the same servers:
  1. 1,000 enabled cron jobs of one ``noop`` task. Their next fires are spread at
     ``--rate`` per second (steady load); each fire's lateness is measured from its
     nominal time to its first task's start (the worker's clock at claim).
  2. The same after adding 99,000 more enabled cron jobs (not due): the two must not
     differ, since finding due fires walks the ``next_fire_at`` index.
  3. A burst: the 1,000 jobs all due at the same second; the time until every first
     task has started.
  4. The task throughput of a 1,000-task fan-out run, for the burst's target
     (1,000 ÷ that throughput + 0.5 s).
  5. The beat's CPU per tick while idle with 100,000 jobs.

Each steady phase also reports how busy the whole machine was (all CPUs, steal apart):
on a shared VM a neighbour's load shows there, not in the processes' own CPU.

Fires are minute-granular in cron, so a steady few hundred per second cannot come from
the expressions themselves: the benchmark sets the jobs' ``next_fire_at`` (the nominal
time of their next fire, which is what the beat reads) to successive instants. Their
cron (``0 0 1 1 *``) puts the fire after that a year away.

    .venv/bin/python bench/scheduler.py [--rate 250] [--jobs 1000] [--filler 99000]
                                        [--engines 1]

``--engines 2``: the scale-out check (issue 18), each engine's CPU per fire beside
their sum, how often a session waited on a lock, and fires that ran twice (none may).

Servers: ``STELLWERK_BENCH_DATABASE_URL`` / ``STELLWERK_BENCH_REDIS_URL`` or embedded.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import percentile, servers, wait_for  # noqa: E402
from bench.pg_activity import Counters, LockWaits  # noqa: E402
from bench.processes import Processes, by_component, start_stellwerk  # noqa: E402
from common.domain.spec import JobSpec  # noqa: E402
from common.persistence.db import make_engine, make_sessions  # noqa: E402
from common.persistence.models import Base  # noqa: E402

LEAD = timedelta(seconds=3)  # the first measured fire is this far from when it is set
P99_TARGET_MS = 100


def template_job(database_url: str) -> uuid.UUID:
    """One cron job made by the service, as the API makes it; the others are its clones."""
    from scheduler.services.jobs import create_job

    spec = JobSpec.model_validate({
        "name": "bench-template", "schedule": {"cron": "0 0 1 1 *", "timezone": "UTC"},
        "tasks": [{"name": "t", "type": "noop"}],
    })
    sessions = make_sessions(make_engine(database_url))
    with sessions.begin() as session:
        created = create_job(session, spec, datetime.now(UTC))
    return created.job_id


def clone_jobs(conn: psycopg.Connection[Any], template: uuid.UUID, n: int, prefix: str,
               fire_at: datetime | None) -> list[uuid.UUID]:
    """``n`` copies of the template (job, tasks, storage rows) in one statement each."""
    conn.execute("drop table if exists clone_map")
    conn.execute("create temp table clone_map as select gen_random_uuid() as id, g "
                 "from generate_series(1, %s) g", (n,))
    overrides = {"jobs": {"id": "m.id", "name": f"'{prefix}-' || m.g",
                          "next_fire_at": "%(fire_at)s"},
                 "tasks": {"id": "gen_random_uuid()", "job_id": "m.id"},
                 "job_storage": {"job_id": "m.id"}}
    for table, changed in overrides.items():
        columns = [c.name for c in Base.metadata.tables[table].columns]
        values = [changed.get(c, f"t.{c}") for c in columns]
        key = "id" if table == "jobs" else "job_id"
        conn.execute(
            f"insert into {table} ({', '.join(columns)}) select {', '.join(values)} "
            f"from clone_map m, {table} t where t.{key} = %(template)s",
            {"template": template, "fire_at": fire_at},
        )
    ids = [row[0] for row in conn.execute("select id from clone_map order by g")]
    conn.commit()
    return ids


def spread_fires(conn: psycopg.Connection[Any], jobs: list[uuid.UUID], start: datetime,
                 rate: float) -> None:
    """Give the jobs successive next fires from ``start``, ``rate`` per second."""
    conn.execute(
        "update jobs set next_fire_at = %s + (m.ord - 1) * %s * interval '1 second' "
        "from unnest(%s::uuid[]) with ordinality as m(id, ord) where jobs.id = m.id",
        (start, 1.0 / rate if rate else 0.0, jobs),
    )
    conn.commit()


def lateness_ms(conn: psycopg.Connection[Any], jobs: list[uuid.UUID], since: datetime,
                timeout_s: float) -> list[float]:
    """Nominal fire → first task started, for each run of ``jobs`` scheduled from ``since``."""
    wait_for(lambda: len(_lateness(conn, jobs, since)) >= len(jobs), timeout_s,
             "fires did not all start", poll_s=0.5)
    late = _lateness(conn, jobs, since)
    engine = [row[1] for row in late]
    print(f"    of which nominal → run started by the engine: p50 "
          f"{percentile(engine, 0.5):.1f} ms, p99 {percentile(engine, 0.99):.1f} ms")
    return [row[0] for row in late]


def _lateness(conn: psycopg.Connection[Any], jobs: list[uuid.UUID],
              since: datetime) -> list[tuple[float, float]]:
    """(to the first task's start, to the run's start) in ms, for each started run."""
    query = ("select extract(epoch from min(tr.started_at) - r.scheduled_for) * 1000, "
             "extract(epoch from r.started_at - r.scheduled_for) * 1000 "
             "from runs r join task_runs tr on tr.run_id = r.id "
             "where r.job_id = any(%s) and r.scheduled_for >= %s group by r.id")
    rows = conn.execute(query, (jobs, since)).fetchall()
    conn.commit()
    return [(float(r[0]), float(r[1])) for r in rows if r[0] is not None]


def steady(conn: psycopg.Connection[Any], database_url: str, jobs: list[uuid.UUID],
           rate: float, procs: Processes) -> tuple[list[float], dict[str, float], str]:
    """Lateness of one fire per job at ``rate`` per second, CPU ms per fire (each process's,
    and each component's when a component has several), and what the machine and
    PostgreSQL did meanwhile."""
    start = datetime.now(UTC) + LEAD
    spread_fires(conn, jobs, start, rate)
    time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))  # idle until the first
    before, machine, pg = procs.cpu_seconds(), MachineLoad(), Counters.read(database_url)
    with LockWaits(database_url) as waits:
        late = lateness_ms(conn, jobs, start, 120 + len(jobs) / rate)
    after = procs.cpu_seconds()
    per_fire = {name: 1000 * (after[name] - before[name]) / len(jobs) for name in after}
    if len(per_fire) > len(by_component(per_fire)):
        per_fire |= {f"{name} (all)": ms for name, ms in by_component(per_fire).items()}
    return late, per_fire, (f"{machine.since()}; PostgreSQL per fire: "
                            f"{Counters.read(database_url).per(pg, len(jobs))}; "
                            f"{waits.summary()}; {duplicate_fires(conn)} fires run twice")


def duplicate_fires(conn: psycopg.Connection[Any]) -> int:
    """Runs of one job for one nominal time beyond the first: two engines or beats that
    each started the same fire."""
    row = conn.execute("SELECT count(*) - count(DISTINCT (job_id, scheduled_for)) FROM runs "
                       "WHERE trigger = 'schedule'").fetchone()
    conn.commit()
    return int(row[0]) if row else 0


class MachineLoad:
    """How busy all CPUs were since construction: busy %, steal % (psutil's counters)."""

    def __init__(self) -> None:
        self._before = psutil.cpu_times()

    def since(self) -> str:
        after = psutil.cpu_times()
        spent = {name: getattr(after, name) - getattr(self._before, name)
                 for name in after._fields}
        total = sum(spent.values()) - spent.get("guest", 0) - spent.get("guest_nice", 0)
        idle = spent["idle"] + spent.get("iowait", 0)
        steal = spent.get("steal", 0)
        return (f"machine {100 * (total - idle - steal) / total:.0f}% busy, "
                f"steal {100 * steal / total:.1f}%")


def burst(conn: psycopg.Connection[Any], jobs: list[uuid.UUID]) -> float:
    """Seconds from the common fire time until every first task has started."""
    start = datetime.now(UTC) + LEAD
    spread_fires(conn, jobs, start, 0)
    return max(lateness_ms(conn, jobs, start, 300)) / 1000


def task_throughput(database_url: str, redis_url: str, tasks: int = 1000) -> float:
    """Tasks a second of one fan-out run of ``tasks`` no-ops, as ``bench/throughput.py``."""
    from bench.throughput import fan_spec, run_job

    _, elapsed = run_job(database_url, redis_url, fan_spec(tasks), 300)
    return (tasks + 2) / elapsed


def idle_tick_ms(procs: Processes, seconds: float = 10) -> float:
    """The beat's CPU per tick (one a second when nothing is due)."""
    before = procs.cpu_seconds()["beat"]
    time.sleep(seconds)
    return 1000 * (procs.cpu_seconds()["beat"] - before) / seconds


def settle(conn: psycopg.Connection[Any]) -> None:
    """Vacuum, analyse and checkpoint before a measured phase.

    Otherwise autovacuum wakes on the 99,000 new rows in the middle of the measurement,
    and the checkpoint that writes back the bulk insert's pages (and a warm-up's) lands
    in it too: commits then wait hundreds of milliseconds on the WAL flush. Steady
    firing does not dirty pages at that rate; the bench's own setup does.
    """
    conn.autocommit = True
    conn.execute("vacuum analyze jobs, tasks, job_storage, runs, task_runs")
    try:
        conn.execute("checkpoint")
    except psycopg.errors.InsufficientPrivilege:
        print("    (no CHECKPOINT privilege: a checkpoint may land in the measurement)")
    conn.autocommit = False


def report(label: str, late: list[float], cpu_ms: dict[str, float], machine: str) -> None:
    cpu = ", ".join(f"{name} {ms:.2f}" for name, ms in cpu_ms.items())
    p99 = percentile(late, 0.99)
    print(f"{label}: fire lateness p50 {percentile(late, 0.5):.1f} ms, "
          f"p99 {p99:.1f} ms, max {max(late):.1f} ms ({len(late)} fires; "
          f"CPU ms per fire: {cpu}; {machine}) - p99 < {P99_TARGET_MS} ms "
          f"{verdict(p99 < P99_TARGET_MS)}")


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=250.0)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--filler", type=int, default=99_000)
    parser.add_argument("--engines", type=int, default=1)
    args = parser.parse_args()
    before = MachineLoad()
    time.sleep(1)
    print(f"before the benchmark starts: {before.since()} (other load skews the figures)")
    with servers() as (database_url, redis_url), Processes() as procs, \
            psycopg.connect(database_url) as conn:
        import redis

        redis.Redis.from_url(redis_url).flushdb()
        template = template_job(database_url)
        jobs = clone_jobs(conn, template, args.jobs - 1, "bench", None) + [template]
        start_stellwerk(procs, database_url, redis_url, engines=args.engines)
        # Warm-up: caches, pools, prepared statements.
        steady(conn, database_url, jobs, args.rate, procs)
        settle(conn)
        small = steady(conn, database_url, jobs, args.rate, procs)
        next_year = datetime(datetime.now(UTC).year + 1, 1, 1, tzinfo=UTC)
        clone_jobs(conn, template, args.filler, "filler", next_year)
        settle(conn)
        total = len(jobs) + args.filler
        large = steady(conn, database_url, jobs, args.rate, procs)
        burst_s = burst(conn, jobs)
        throughput = task_throughput(database_url, redis_url)
        tick_ms = idle_tick_ms(procs)
    print(f"steady load {args.rate:g} fires/s, one noop task each, {args.engines} engine(s); "
          "servers as configured")
    report(f"{len(jobs):>7,} cron jobs", *small)
    report(f"{total:>7,} cron jobs", *large)
    target_s = len(jobs) / throughput + 0.5
    print(f"burst: {len(jobs):,} jobs due at the same second all started after {burst_s:.2f} s "
          f"- target {len(jobs):,} / {throughput:.0f} tasks/s (a 1,000-task fan-out) + 0.5 s "
          f"= {target_s:.2f} s {verdict(burst_s <= target_s)}")
    print(f"beat idle with {total:,} jobs: {tick_ms:.2f} ms CPU per tick")


if __name__ == "__main__":
    main()
