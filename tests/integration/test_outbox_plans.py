"""The outbox's rows are deleted (and locked) by id as a set, whatever PostgreSQL believes.

The engine deletes what it published in its next transaction, a fan-out's 10,000
dispatches at once; the statement runs on its generic plan, and the table was analyzed
empty between fan-outs. ``id = ANY($1)`` was then a scan that compared each row with
every id: 447 ms for 10,000 (``bench/flow.py``). Each test builds that state in a
temporary copy of ``outbox`` (``tests.sql_plans.drained_copy``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from common.persistence.arrays import literal
from common.persistence.queries import DELETE_OUTBOX, LOCK_OUTBOX_IDS
from tests.sql_plans import drained_connection, generic_plan


def fill(conn: psycopg.Connection[Any], queue: str, count: int) -> None:
    conn.execute(
        "INSERT INTO outbox (queue, task_name, payload) "
        "SELECT %s, 'stellwerk.execute', '{}'::jsonb FROM generate_series(1, %s)",
        (queue, count))


@pytest.fixture
def drained(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose ``outbox`` drained, was analyzed, and holds 10,000 rows."""
    with drained_connection(database_url, "outbox", fill, 10_000) as conn:
        yield conn


@pytest.mark.parametrize("statement", [DELETE_OUTBOX, LOCK_OUTBOX_IDS])
def test_rows_by_id_are_never_compared_with_every_id(
    drained: psycopg.Connection[Any], statement: str,
) -> None:
    plan = generic_plan(drained, statement, "'{1,2,3}'")
    assert not any("= ANY" in line for line in plan), plan


def test_a_fan_out_s_rows_go_and_only_they(drained: psycopg.Connection[Any]) -> None:
    ids = [row[0] for row in drained.execute(
        "SELECT id FROM outbox WHERE queue = 'key:now' ORDER BY id LIMIT 9000")]
    drained.execute(DELETE_OUTBOX, (literal(ids),))
    left = drained.execute("SELECT count(*), min(id) FROM outbox").fetchone()
    assert left == (1000, ids[-1] + 1)
