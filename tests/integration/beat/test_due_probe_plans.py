"""The beat's probes step into an index whatever the statistics say.

``FIRING_DUE`` runs five times a second on one connection, so PostgreSQL plans it once,
generically. Asked ``EXISTS (... WHERE retry_at <= $1)`` with statistics that show many
retry times, it estimated a third of them due and chose a sequential scan that would
stop at the first: with every retry time in the future it read the whole table on each
probe (1.5 ms for 20,000 rows, 14.5 ms for 200,000). The test builds that state in a
temporary copy of ``task_runs`` (same columns and indexes), which hides the real table
from its own connection only.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from common.persistence.queries import FIRING_DUE
from tests.sql_plans import generic_plan


@pytest.fixture
def retries_later(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose ``task_runs`` holds 20,000 attempts, each to retry in an hour."""
    with psycopg.connect(database_url) as conn:
        conn.execute("CREATE TEMP TABLE task_runs "
                     "(LIKE public.task_runs INCLUDING ALL) ON COMMIT DROP")
        conn.execute(
            "INSERT INTO task_runs (id, run_id, task_id, name, type, state, attempt, base, "
            "message, detached, retry_at) SELECT gen_random_uuid(), gen_random_uuid(), "
            "gen_random_uuid(), 't' || i, 'noop', 'WAITING', 1, 0, '', false, "
            "now() + interval '1 hour' + i * interval '1 ms' "
            "FROM generate_series(1, 20000) AS i")
        conn.execute("ANALYZE task_runs")
        yield conn
        conn.rollback()


def test_the_retry_probe_reads_the_index_not_the_table(
    retries_later: psycopg.Connection[Any],
) -> None:
    plan = generic_plan(retries_later, FIRING_DUE, "now()")
    assert not any("Seq Scan on task_runs" in line for line in plan), "\n".join(plan)
    assert any("ix_task_runs_retry_at" in line or "task_runs_retry_at_idx" in line
               for line in plan), "\n".join(plan)


def test_the_retry_probe_says_nothing_is_due_yet(
    retries_later: psycopg.Connection[Any],
) -> None:
    row = retries_later.execute(FIRING_DUE, {"horizon": datetime.now(UTC)}).fetchone()
    assert row is not None and row[3] is False
