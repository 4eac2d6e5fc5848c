"""A wide job is read, loaded and deleted in a time that grows with its size only.

The tests fill temporary copies of ``jobs``, ``tasks`` and ``task_edges`` (same columns
and indexes, hiding the real tables from their own connection) with one fan-out of
2,000 tasks and never analyze them: the state of a job read as soon as it is written.
There, ``READ_JOB`` looked each task's successors up with a join that PostgreSQL ran
once per task over every task (6-11 s for 10,000 tasks); the engine's read of a job's
edges scanned every job's edges, and deleting a task had PostgreSQL look for the edges
pointing to it (its foreign key's cascade) with a scan of them all.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from common.persistence.queries import LOAD_EDGES, READ_JOB
from scheduler.services.job_queries import job_detail
from tests.sql_plans import generic_plan, most_loops

WIDE = 2_000


@pytest.fixture
def fan_out(database_url: str) -> Iterator[tuple[psycopg.Connection[Any], uuid.UUID]]:
    """A job of ``start``, ``t1``..``t{WIDE}`` and ``join`` (each ``t`` after ``start``,
    ``join`` after each ``t``) in unanalyzed temporary tables."""
    job_id = uuid.uuid4()
    with psycopg.connect(database_url) as conn:
        for table in ("jobs", "tasks", "task_edges"):
            conn.execute(f"CREATE TEMP TABLE {table} (LIKE public.{table} INCLUDING ALL) "
                         "ON COMMIT DROP")
        conn.execute(
            "INSERT INTO jobs (id, name, description, application, type, tenant, owner, "
            "  labels, priority, params, spec, schedule, draft, enabled, version, created_at, "
            "  updated_at) VALUES (%s, 'wide', '', '', '', '', '', '{}', 5, '{}', '{}', '{}', "
            "  true, true, 1, now(), now())", (job_id,))
        conn.execute(
            "INSERT INTO tasks (id, job_id, position, name, type, params, timeout_s, retries, "
            "  retry_backoff_s, confirm, priority) SELECT gen_random_uuid(), %s, i, "
            "  CASE i WHEN 0 THEN 'start' WHEN %s THEN 'join' ELSE 't' || i END, 'noop', "
            "  '{}', 60, 0, 1, false, 5 FROM generate_series(0, %s) AS i",
            (job_id, WIDE + 1, WIDE + 1))
        conn.execute(
            "INSERT INTO task_edges (job_id, from_task, to_task) "
            "SELECT %(job)s, f.id, t.id FROM tasks AS f, tasks AS t WHERE "
            "  (f.name = 'start' AND t.name LIKE 't%%') OR (f.name LIKE 't%%' AND t.name = 'join')",
            {"job": job_id})
        yield conn, job_id
        conn.rollback()


def test_a_wide_job_is_read_with_one_scan_of_its_tasks_and_one_of_its_edges(
    fan_out: tuple[psycopg.Connection[Any], uuid.UUID],
) -> None:
    conn, job_id = fan_out
    plan = [row[0] for row in conn.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + READ_JOB, (job_id,))]

    assert most_loops(plan, "tasks") == 1, "\n".join(plan)
    assert most_loops(plan, "task_edges") == 1, "\n".join(plan)


def test_the_read_names_each_tasks_successors_in_task_order(
    fan_out: tuple[psycopg.Connection[Any], uuid.UUID],
) -> None:
    conn, job_id = fan_out
    row = conn.cursor(row_factory=dict_row).execute(READ_JOB, (job_id,)).fetchone()
    detail = job_detail(job_id, row)

    nexts = {view.task.name: view.next for view in detail.tasks}
    assert [view.task.name for view in detail.tasks][:3] == ["start", "t1", "t2"]
    assert nexts["start"] == [f"t{i}" for i in range(1, WIDE + 1)]
    assert nexts["t7"] == ["join"]
    assert nexts["join"] == []


def test_a_jobs_edges_and_the_edges_to_a_task_are_found_by_index(
    fan_out: tuple[psycopg.Connection[Any], uuid.UUID],
) -> None:
    """The engine's read of a job's edges, and the lookup the foreign key's cascade runs
    for each task deleted (``DELETE FROM ONLY task_edges WHERE $1 = to_task``)."""
    conn, _ = fan_out
    for statement, args, column in (
        (LOAD_EDGES, "ARRAY[gen_random_uuid()]", "job_id"),
        ("DELETE FROM ONLY task_edges WHERE %s = to_task", "gen_random_uuid()", "to_task"),
    ):
        plan = generic_plan(conn, statement, args)

        assert any("Index Cond" in line and column in line for line in plan), "\n".join(plan)
        assert not any("Seq Scan" in line for line in plan), "\n".join(plan)
