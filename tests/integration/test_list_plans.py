"""A page of a list reads the page, not the table (``GET /jobs``, ``GET /runs``).

Each test fills temporary copies of ``jobs`` and ``runs`` (same columns and indexes,
hiding the real tables from its own connection only) with 20,000 jobs of a run each,
and runs the list's statement under ``EXPLAIN ANALYZE``: the page read backwards from
the index on ``(created_at, id)``, no sequential scan, and the runs (or jobs) of the
rows shown looked up for those rows only. Without the index each page read and sorted
the whole table (28-44 ms for 50,000 rows), 540 ms while a job's latest run was joined
before the page was taken.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from common.persistence.queries import LIST_JOBS, LIST_RUNS

ROWS = 20_000
PAGE = 21


@pytest.fixture
def filled(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url) as conn:
        for table in ("jobs", "runs"):
            conn.execute(f"CREATE TEMP TABLE {table} (LIKE public.{table} INCLUDING ALL) "
                         "ON COMMIT DROP")
        conn.execute(
            "INSERT INTO jobs (id, name, description, application, type, tenant, owner, "
            "  labels, priority, params, spec, schedule, draft, enabled, version, created_at, "
            "  updated_at) SELECT gen_random_uuid(), 'job-' || i, '', '', '', '', '', '{}', 5, "
            "  '{}', '{}', '{}', false, true, 1, now() - i * interval '1 s', now() "
            "FROM generate_series(1, %s) AS i", (ROWS,))
        conn.execute(
            "INSERT INTO runs (id, job_id, number, trigger, state, scheduled_for, "
            "  created_at, updated_at) SELECT gen_random_uuid(), id, 1, 'api', 'COMPLETED', "
            "  now(), created_at, now() FROM jobs")
        conn.execute("ANALYZE jobs")
        conn.execute("ANALYZE runs")
        yield conn
        conn.rollback()


def plan_of(conn: psycopg.Connection[Any], statement: str) -> list[str]:
    query = statement.format(where="true")
    rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {query}", {"limit": PAGE})
    return [row[0] for row in rows]


def most_loops(plan: list[str], table: str) -> int:
    """The most times a scan of ``table`` ran (``loops=N`` of its lines)."""
    loops = [int(found.group(1)) for line in plan if f" on {table}" in line
             if (found := re.search(r"loops=(\d+)", line))]
    return max(loops)


def test_a_page_of_jobs_looks_up_the_latest_runs_of_its_jobs_only(
    filled: psycopg.Connection[Any],
) -> None:
    plan = plan_of(filled, LIST_JOBS)
    assert not any("Seq Scan" in line for line in plan), plan
    assert any(re.search(r"Index (Only )?Scan Backward using \w+ on jobs", line)
               for line in plan), plan
    assert most_loops(plan, "runs") <= PAGE, plan


def test_a_page_of_runs_reads_its_runs_only(filled: psycopg.Connection[Any]) -> None:
    plan = plan_of(filled, LIST_RUNS)
    assert not any("Seq Scan" in line for line in plan), plan
    assert any(re.search(r"Index (Only )?Scan Backward using \w+ on runs", line)
               for line in plan), plan
    assert most_loops(plan, "jobs") <= PAGE, plan
