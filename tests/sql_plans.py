"""Statements as PostgreSQL takes them, and as it plans them for a connection that
repeats them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql


def numbered(sql: str) -> str:
    """``%s``, ``%b`` and ``%(name)s`` placeholders as PostgreSQL's ``$1, $2, ...``."""
    names: dict[str, int] = {}
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        name = match.group(1)
        if name is not None and name in names:
            return f"${names[name]}"
        count += 1
        if name is not None:
            names[name] = count
        return f"${count}"

    return re.sub(r"%(?:\((\w+)\))?[sb]", number, sql)


def generic_plan(conn: psycopg.Connection[Any], sql: str, args: str) -> list[str]:
    """The generic plan of ``sql`` (``EXPLAIN EXECUTE`` of it prepared), one line each.

    A statement a connection runs often (psycopg prepares it after five) is planned once
    for any parameters; ``EXPLAIN`` of the statement itself plans for the values given.
    ``args`` are the ``EXECUTE``'s arguments, as SQL ("" for none).
    """
    conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    conn.execute(f"PREPARE probed AS {numbered(sql)}")
    given = f"({args})" if args else ""
    plan = [row[0] for row in conn.execute(f"EXPLAIN EXECUTE probed{given}")]
    conn.execute("DEALLOCATE probed")  # after a failure, the connection's end drops it
    return plan


def most_loops(plan: list[str], table: str) -> int:
    """The most times a scan of ``table`` ran (``loops=N`` of its lines in an ``EXPLAIN
    ANALYZE``)."""
    loops = [int(found.group(1)) for line in plan if re.search(rf" on {table}\b", line)
             if (found := re.search(r"loops=(\d+)", line))]
    return max(loops)


def drained_copy(
    conn: psycopg.Connection[Any], table: str,
    fill: Callable[[psycopg.Connection[Any], str, int], None], count: int,
) -> None:
    """A temporary copy of ``table`` (hiding it from ``conn``) that was filled, drained
    and analyzed (its row estimate now zero), then filled with ``count`` rows of
    ``key:now``."""
    name = sql.Identifier(table)
    conn.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {} INCLUDING ALL) ON COMMIT DROP")
                 .format(name, sql.Identifier("public", table)))
    fill(conn, "key:drained", 5000)
    conn.execute(sql.SQL("DELETE FROM {}").format(name))
    conn.execute(sql.SQL("ANALYZE {}").format(name))
    fill(conn, "key:now", count)


@contextmanager
def drained_connection(
    database_url: str, table: str,
    fill: Callable[[psycopg.Connection[Any], str, int], None], count: int,
) -> Iterator[psycopg.Connection[Any]]:
    """A connection that sees :func:`drained_copy` of ``table``, rolled back after."""
    with psycopg.connect(database_url) as conn:
        drained_copy(conn, table, fill, count)
        yield conn
        conn.rollback()
