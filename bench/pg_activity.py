"""What PostgreSQL did during a measurement: commits, WAL bytes, sessions waiting on locks.

For the scale-out and capacity figures (issue 18): two engines must share the load
without waiting on each other's row locks, and the capacity model needs PostgreSQL's
commits and WAL bytes per task and per fire.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psutil
import psycopg

COUNTERS = (
    "SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint "
    "FROM pg_stat_database WHERE datname = current_database()"
)
LOCK_WAITERS = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
)
DUPLICATE_TRANSITIONS = (
    "SELECT count(*) FROM (SELECT 1 FROM journal WHERE run_id = ANY(%s) "
    "AND task IS NOT NULL GROUP BY task, attempt, to_state, run_id HAVING count(*) > 1) d"
)
REPEATED_ATTEMPTS = "SELECT count(*) FROM task_runs WHERE run_id = ANY(%s) AND attempt > 1"


@dataclass(frozen=True)
class Counters:
    """The database's commits so far (reads included), the cluster's WAL position and
    the CPU its server processes on this machine have used (none when it runs elsewhere;
    a backend that has exited takes its CPU with it: count long-lived pools only)."""

    commits: int
    wal_bytes: int
    server_cpu_s: float

    @classmethod
    def read(cls, database_url: str) -> Counters:
        """Now; commit counts lag by up to a second (backends flush them when idle)."""
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(COUNTERS).fetchone()
        assert row is not None
        return cls(int(row[0]), int(row[1]), _server_cpu_s())

    def per(self, since: Counters, units: int) -> str:
        """Commits, WAL kB and server CPU ms per unit of work since ``since``."""
        return (f"{(self.commits - since.commits) / units:.2f} commits, "
                f"{(self.wal_bytes - since.wal_bytes) / units / 1024:.2f} kB of WAL, "
                f"{1000 * (self.server_cpu_s - since.server_cpu_s) / units:.2f} ms of "
                "server CPU")


def _server_cpu_s() -> float:
    """User+system CPU of every ``postgres`` process on this machine."""
    return server_cpu_s()["postgres"]


SERVERS = {"postgres": "postgres", "redis-server": "redis"}


def server_cpu_s() -> dict[str, float]:
    """User+system CPU of the servers' processes on this machine (PostgreSQL's, Redis's).

    A server elsewhere counts 0; so does a process that exited (its CPU went with it).
    """
    totals = dict.fromkeys(SERVERS.values(), 0.0)
    for proc in psutil.process_iter(["name", "cpu_times"]):
        server = SERVERS.get(proc.info["name"])
        if server is not None and proc.info["cpu_times"] is not None:
            totals[server] += proc.info["cpu_times"].user + proc.info["cpu_times"].system
    return totals


class LockWaits:
    """Samples, every 20 ms in a thread, how many sessions wait on a lock (row locks:
    two engines locking the same run)."""

    def __init__(self, database_url: str, every_s: float = 0.02) -> None:
        self._url = database_url
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.samples: list[int] = []

    def _sample(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not self._stop.wait(self._every_s):
                row = conn.execute(LOCK_WAITERS).fetchone()
                self.samples.append(int(row[0]) if row else 0)

    def __enter__(self) -> LockWaits:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        """The share of samples with a session waiting, and the mean number waiting."""
        n = max(len(self.samples), 1)
        waiting = sum(1 for s in self.samples if s)
        return (f"a session waited on a lock in {100 * waiting / n:.1f}% of {len(self.samples)} "
                f"samples (mean {sum(self.samples) / n:.2f} waiting)")


def duplicate_work(database_url: str, run_ids: list[Any]) -> str:
    """Transitions recorded twice and tasks run more than once, in the given runs."""
    with psycopg.connect(database_url) as conn:
        twice = conn.execute(DUPLICATE_TRANSITIONS, (run_ids,)).fetchone()
        again = conn.execute(REPEATED_ATTEMPTS, (run_ids,)).fetchone()
    return (f"{twice[0] if twice else '?'} transitions recorded twice, "
            f"{again[0] if again else '?'} tasks run more than once")
