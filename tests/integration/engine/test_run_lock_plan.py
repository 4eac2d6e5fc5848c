"""The engine's lock of its runs reads them by their primary key, planned once.

``LOCK_RUNS`` runs with the generic plan forced (``PIN_PLAN``: a custom plan for its
array parameter cost more planning than execution each batch). The test builds a
temporary copy of ``runs`` with 20,000 rows, analyzed (and a ``jobs`` of their one job),
which hide the real tables from its own connection only, and checks that the generic
plan steps into the primary key rather than reading the table, and what it returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from common.persistence.queries import LOCK_RUNS, PIN_PLAN, UNPIN_PLAN
from scheduler.engine.loading import LockedRun
from tests.sql_plans import generic_plan


@pytest.fixture
def many_runs(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose ``runs`` holds 20,000 runs of one job, analyzed."""
    job_id = uuid.uuid4()
    with psycopg.connect(database_url) as conn:
        conn.execute("CREATE TEMP TABLE runs (LIKE public.runs INCLUDING ALL) ON COMMIT DROP")
        # What the lock reads of a job: its id and version.
        conn.execute("CREATE TEMP TABLE jobs (id uuid PRIMARY KEY, version int) ON COMMIT DROP")
        conn.execute("INSERT INTO jobs VALUES (%s, 7)", (job_id,))
        conn.execute(
            "INSERT INTO runs (id, job_id, number, trigger, state, scheduled_for) "
            "SELECT gen_random_uuid(), %s, i, 'manual', 'COMPLETED', now() "
            "FROM generate_series(1, 20000) AS i", (job_id,))
        conn.execute("ANALYZE runs")
        yield conn
        conn.rollback()


def test_the_run_lock_reads_runs_by_their_primary_key(
    many_runs: psycopg.Connection[Any],
) -> None:
    plan = generic_plan(many_runs, LOCK_RUNS, "ARRAY[gen_random_uuid()]")
    assert not any("Seq Scan on runs" in line for line in plan), "\n".join(plan)
    # a (bitmap) index scan of the copy's primary key, named after the table
    assert any("Scan" in line and "runs_pkey" in line for line in plan), "\n".join(plan)


def test_the_pinned_lock_returns_the_runs_asked_for(
    many_runs: psycopg.Connection[Any],
) -> None:
    wanted = [row[0] for row in many_runs.execute(
        "SELECT id FROM runs ORDER BY random() LIMIT 3")]
    many_runs.execute(PIN_PLAN)
    for _ in range(6):  # past psycopg's prepare threshold: the prepared statement answers
        rows = many_runs.execute(LOCK_RUNS, ([*wanted, uuid.uuid4()],)).fetchall()
    mode = many_runs.execute("SHOW plan_cache_mode").fetchone()
    many_runs.execute(UNPIN_PLAN)
    assert mode == ("force_generic_plan",)
    locked = [LockedRun(*row) for row in rows]
    assert [run.id for run in locked] == sorted(wanted)  # an unknown id is left out
    assert {run.job_version for run in locked} == {7}
    assert many_runs.execute("SHOW plan_cache_mode").fetchone() == ("auto",)
