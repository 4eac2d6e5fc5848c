"""A page of a list reads the page, not the table (``GET /jobs``, ``GET /runs``, a
run's journal).

Each test fills temporary copies of ``jobs`` and ``runs`` (same columns and indexes,
hiding the real tables from its own connection only) with 20,000 jobs of a run each,
and runs the list's statement under ``EXPLAIN ANALYZE``: the page read backwards from
the index on ``(created_at, id)``, no sequential scan, and the runs (or jobs) of the
rows shown looked up for those rows only. Without the index each page read and sorted
the whole table (28-44 ms for 50,000 rows), 540 ms while a job's latest run was joined
before the page was taken. A page of a run's journal (40,000 entries for a 10,000-task
fan-out) is a range of the index on ``(run_id, id)``, not every entry of the run sorted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from common.persistence.queries import LIST_JOBS, LIST_RUNS, READ_JOURNAL
from tests.sql_plans import most_loops

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


def test_a_page_of_a_journal_reads_that_page_of_its_run_only(
    filled: psycopg.Connection[Any],
) -> None:
    """Twenty runs' entries interleaved as the engine writes them, then two hundred
    others': the last page of an early run and the first of a late one are read from
    the index by run and id, no other run's entry (the primary key read from ``after``
    on and filtered by run, 28,113 rows for a last page of 5)."""
    filled.execute("CREATE TEMP TABLE journal (LIKE public.journal INCLUDING ALL) "
                   "ON COMMIT DROP")
    for count, offset, runs in ((1000, 0, 20), (100, 20, 200)):
        filled.execute(
            "INSERT INTO journal (run_id, task, attempt, at, from_state, to_state, reason, "
            "  actor) SELECT r.id, 't' || i, 0, now(), 'WAITING', 'READY', '', 'engine' "
            "FROM generate_series(1, %s) AS i, "
            "  (SELECT id FROM runs ORDER BY id OFFSET %s LIMIT %s) AS r ORDER BY i, r.id",
            (count, offset, runs))
    filled.execute("ANALYZE journal")
    ids = filled.execute("SELECT run_id, array_agg(id ORDER BY id) FROM journal "
                         "GROUP BY run_id ORDER BY min(id)").fetchall()
    (early, early_ids), (late, _) = ids[0], ids[-1]

    for run_id, after, rows in ((early, early_ids[-6], 5), (late, 0, PAGE)):
        plan = [row[0] for row in filled.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + READ_JOURNAL.format(where="true"),
            {"run_id": run_id, "after": after, "limit": PAGE})]

        assert any(re.search(rf"Index Scan using \w+ on journal \(actual rows={rows}\b",
                             line) for line in plan), plan
        assert any("Index Cond" in line and "run_id" in line for line in plan), plan
        assert not any("Sort" in line or "Removed by Filter" in line for line in plan), plan
