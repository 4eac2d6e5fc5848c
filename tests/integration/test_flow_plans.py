"""Reads of a flow queue by key take its order index, even when PostgreSQL believes the
queue empty (issue 16).

An ANALYZE that finds only dead rows (autovacuum's, after a queue drained) leaves the
table's row estimate at zero whatever it holds later; every index then costs alike,
and the admission's read once took the primary key: a scan and sort of every waiter of
the key, 5-18 ms a batch in one fan-out of three. Each test builds that state in a
temporary copy of ``flow_waiters`` (same columns and indexes), which hides the real
table from its own connection only, and asks for the generic plan, which a connection
keeps for the statements it runs often (``tests.sql_plans``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from common.persistence import queries
from common.persistence.queries import (
    FLOW_CANDIDATES,
    FLOW_USAGE,
    PIN_INDEX,
    PIN_ORDER,
    UNPIN_INDEX,
    UNPIN_ORDER,
    WAITING_FLOW_KEYS,
)
from tests.sql_plans import drained_connection, drained_copy, generic_plan

ORDER_COLUMNS = "(key, tenant, priority DESC, seq)"
TENANT = "tenant-" + "t" * 150


@pytest.fixture
def drained(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose ``flow_waiters`` drained, was analyzed, and holds 2,000 waiters."""
    with drained_connection(database_url, "flow_waiters", fill, 2000) as conn:
        yield conn


def fill(conn: psycopg.Connection[Any], key: str, count: int) -> None:
    """``count`` waiters of three tenants with long names: the order index, which holds
    the tenant, is then the larger one, and the cheaper-looking primary key tempts."""
    conn.execute(
        "INSERT INTO flow_waiters (key, task_run_id, run_id, task, attempt, tenant, priority, "
        "stated_limit, since) SELECT %s, gen_random_uuid(), %s, 't' || i, 1, "
        "%s || (i %% 3), i %% 2, 50, now() FROM generate_series(1, %s) AS i",
        (key, uuid.uuid4(), TENANT, count))


def order_index(conn: psycopg.Connection[Any]) -> str:
    """The name of the temporary table's copy of ``ix_flow_waiters_order``."""
    rows = conn.execute("SELECT indexname, indexdef FROM pg_indexes "
                        "WHERE tablename = 'flow_waiters' AND schemaname LIKE 'pg_temp%%'")
    names = [name for name, definition in rows if definition.endswith(ORDER_COLUMNS)]
    assert len(names) == 1, names
    return str(names[0])


def indexes_read_by_key(conn: psycopg.Connection[Any], sql: str, args: str) -> set[str]:
    """The indexes a pinned generic plan of ``sql`` reads by key (or whole, in order)."""
    conn.execute(PIN_ORDER)
    plan = generic_plan(conn, sql, args)
    conn.execute(UNPIN_ORDER)
    assert not any("Seq Scan on flow_waiters" in line for line in plan), plan
    used: set[str] = set()
    for scan, cond in zip(plan, [*plan[1:], ""], strict=True):
        match = re.search(r"Index (?:Only )?Scan (?:using |on )(\w+)", scan)
        if match and (re.search(r"\bkey\b", cond) or "Index Cond" not in cond):
            used.add(match.group(1))
    assert used, plan  # the plan reads by key somewhere
    return used


def test_the_candidates_read_takes_the_order_index(drained: psycopg.Connection[Any]) -> None:
    used = indexes_read_by_key(drained, FLOW_CANDIDATES, "'{key:now}', 50")
    assert used == {order_index(drained)}


def test_the_beats_read_of_waiting_keys_takes_the_order_index(
    drained: psycopg.Connection[Any],
) -> None:
    """(Whether an engine took a slot lately reads ``flow_slots``: attempts in flight.)"""
    used = indexes_read_by_key(drained, WAITING_FLOW_KEYS, "now()")
    assert used == {order_index(drained)}


def test_the_candidates_read_answers_in_order(drained: psycopg.Connection[Any]) -> None:
    """Pinned, the read still answers as the admission expects: each tenant's first two,
    by priority then age."""
    drained.execute(PIN_ORDER)
    rows = drained.execute(FLOW_CANDIDATES, (["key:now"], 2)).fetchall()
    drained.execute(UNPIN_ORDER)
    got = [(tenant, priority) for _, _, _, _, _, tenant, priority, *_ in rows]
    assert got == [(TENANT + n, 1) for n in "001122"]
    seqs = [row[7] for row in rows]
    assert seqs[0] < seqs[1] and seqs[2] < seqs[3] and seqs[4] < seqs[5]


def test_the_usage_read_takes_the_slots_by_key(database_url: str) -> None:
    """``FLOW_USAGE`` runs on its generic plan too (``in_key_order``): on a drained
    ``flow_slots`` that now holds 20,000 slots, it still steps into the key's slots."""
    with psycopg.connect(database_url) as conn:
        drained_copy(conn, "flow_slots", fill_slots, 20000)
        conn.execute(PIN_ORDER)
        plan = generic_plan(conn, FLOW_USAGE, "'{key:now1}'")
        conn.rollback()
    assert not any("Seq Scan" in line for line in plan), plan
    assert any(re.search(r"Index (Only )?Scan using \w+ on flow_slots", line) for line in plan)
    assert any("Index Cond: ((key)::text = ANY" in line for line in plan), plan


def fill_slots(conn: psycopg.Connection[Any], key: str, count: int) -> None:
    """``count`` slots spread over 40 keys named ``key`` and a number."""
    conn.execute(
        "INSERT INTO flow_slots (key, task_run_id, attempt, tenant, at) "
        "SELECT %s || (i %% 40), gen_random_uuid(), 1, 't' || (i %% 3), now() "
        "FROM generate_series(1, %s) AS i", (key, count))


@pytest.mark.parametrize("statement", ["RELEASE_FLOW", "TAKE_FLOW_SLOTS"])
def test_the_deletes_of_waiters_by_id_take_an_index(
    drained: psycopg.Connection[Any], statement: str,
) -> None:
    """Between ``PIN_INDEX`` and ``UNPIN_INDEX``: planned as a scan of all 10,000
    waiters, an admission's delete of a lane's 200 took 120-180 ms."""
    ids = "'{00000000-0000-0000-0000-000000000001}'"
    args = ids if statement == "RELEASE_FLOW" else ", ".join([ids] + ["'{}'"] * 8)
    drained.execute(PIN_INDEX)
    plan = generic_plan(drained, getattr(queries, statement), args)
    drained.execute(UNPIN_INDEX)
    assert not any("Seq Scan on flow_waiters" in line for line in plan), plan
    assert any(re.search(r"Index (Only )?Scan using \w+ on flow_waiters", line)
               for line in plan), plan
