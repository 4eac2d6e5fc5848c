"""Statements on libpq's pipeline (``common.persistence.pipelined``) against a real server.

What the engine relies on: rows loaded as a cursor loads them, its transaction begun
and committed as psycopg would, an error raised after the pipeline is drained with
nothing of the transaction kept, and the connection usable afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg
import pytest

from common.persistence.pipelined import Pipelined


class Pair(NamedTuple):
    id: uuid.UUID
    at: datetime


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url) as connection:
        yield connection


@pytest.fixture
def table(conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A table of this test's own."""
    name = f"pipelined_{uuid.uuid4().hex[:12]}"
    conn.execute(f"CREATE TABLE {name} (id uuid PRIMARY KEY, n int, at timestamptz)")
    conn.commit()
    yield name
    conn.rollback()
    conn.execute(f"DROP TABLE {name}")
    conn.commit()


def test_rows_read_back_as_a_cursor_reads_them(
    conn: psycopg.Connection[Any], table: str,
) -> None:
    ids = [uuid.uuid4(), uuid.uuid4()]
    at = datetime(2026, 11, 28, 4, 30, tzinfo=UTC)
    with Pipelined(conn) as pipe:
        inserted = pipe.execute(
            f"INSERT INTO {table} (id, n, at) SELECT unnest(%s::uuid[]), 7, %s",
            ("{" + ",".join(map(str, ids)) + "}", at))
        read = pipe.execute(f"SELECT id, at FROM {table} ORDER BY id")
        counted = pipe.execute("SELECT %s::int + %s::int", (2, 3))
    assert inserted.fetchall() == []
    assert read.fetch_as(Pair._make) == sorted(Pair(i, at) for i in ids)
    assert counted.fetchall() == [(5,)]
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (2,)


def test_the_transaction_is_begun_and_left_to_the_caller(
    conn: psycopg.Connection[Any], table: str,
) -> None:
    with Pipelined(conn) as pipe:
        pipe.execute(f"INSERT INTO {table} (id, n) VALUES (%s, 1)", (uuid.uuid4(),))
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    conn.rollback()
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


def test_a_commit_at_the_end_leaves_the_connection_idle(
    conn: psycopg.Connection[Any], table: str,
) -> None:
    with Pipelined(conn) as pipe:
        pipe.execute(f"INSERT INTO {table} (id, n) VALUES (%s, 1)", (uuid.uuid4(),))
        pipe.execute("COMMIT")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    conn.rollback()  # what the engine's caller does on a later error: nothing to undo
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)


def test_an_error_aborts_the_rest_and_is_raised_after_the_drain(
    conn: psycopg.Connection[Any], table: str,
) -> None:
    row = uuid.uuid4()
    with pytest.raises(psycopg.errors.UniqueViolation), Pipelined(conn) as pipe:
        pipe.execute(f"INSERT INTO {table} (id, n) VALUES (%s, 1)", (row,))
        pipe.execute(f"INSERT INTO {table} (id, n) VALUES (%s, 2)", (row,))
        pipe.execute("COMMIT")
    conn.rollback()
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    with Pipelined(conn) as pipe:  # the connection goes on as before
        again = pipe.execute("SELECT 1")
    assert again.fetchall() == [(1,)]


def test_a_reply_is_not_read_before_its_pipeline_is_over(conn: psycopg.Connection[Any]) -> None:
    with Pipelined(conn) as pipe:
        early = pipe.execute("SELECT 1")
        with pytest.raises(RuntimeError, match="not been synced"):
            early.fetchall()


@pytest.fixture
def unprepared(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose driver prepares nothing itself, as the engine's."""
    with psycopg.connect(database_url, prepare_threshold=None) as connection:
        yield connection


def _prepared_here(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT name FROM pg_prepared_statements ORDER BY name").fetchall()
    conn.rollback()
    return [row[0] for row in rows]


def test_a_statement_is_prepared_once_a_session_and_run_by_name(
    unprepared: psycopg.Connection[Any],
) -> None:
    for n in range(3):
        with Pipelined(unprepared) as pipe:
            answer = pipe.execute("SELECT %s::int * 2", (n,))
            same = pipe.execute("SELECT %s::int * 2", (n + 1,))
            pipe.execute("COMMIT")
        assert (answer.fetchall(), same.fetchall()) == ([(2 * n,)], [(2 * n + 2,)])
    assert len(_prepared_here(unprepared)) == 1


def test_a_driver_that_prepares_its_own_gets_unnamed_statements(
    conn: psycopg.Connection[Any],
) -> None:
    with Pipelined(conn) as pipe:
        pipe.execute("SELECT %s::int", (1,))
    assert _prepared_here(conn) == []


def test_statements_the_server_lost_are_prepared_anew_after_one_failure(
    unprepared: psycopg.Connection[Any],
) -> None:
    with Pipelined(unprepared) as pipe:
        pipe.execute("SELECT %s::int", (1,))
        pipe.execute("COMMIT")
    unprepared.execute("DEALLOCATE ALL")
    unprepared.commit()
    with pytest.raises(psycopg.errors.InvalidSqlStatementName), Pipelined(unprepared) as pipe:
        pipe.execute("SELECT %s::int", (2,))
    unprepared.rollback()
    with Pipelined(unprepared) as pipe:
        again = pipe.execute("SELECT %s::int", (3,))
    assert again.fetchall() == [(3,)]


def test_a_statement_that_failed_to_prepare_is_prepared_again(
    unprepared: psycopg.Connection[Any],
) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable), Pipelined(unprepared) as pipe:
        pipe.execute("SELECT n FROM pipelined_nowhere WHERE n = %s", (1,))
    unprepared.rollback()
    unprepared.execute("CREATE TEMP TABLE pipelined_nowhere (n int)")
    with Pipelined(unprepared) as pipe:
        found = pipe.execute("SELECT n FROM pipelined_nowhere WHERE n = %s", (1,))
    assert found.fetchall() == []
