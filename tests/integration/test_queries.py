"""Every statement of ``common.persistence.queries`` names tables and columns that exist.

PostgreSQL prepares each one against the migrated schema (``PREPARE``): parsing,
resolving every name and inferring the parameters' types, without running it. A column
renamed or dropped in a migration fails here, not in production when the statement first
runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import TextClause, create_engine

from common.persistence import queries
from scheduler.engine.rows import RunUpdate, TaskRunUpdate
from scheduler.engine.writer import update_statement
from tests.sql_plans import numbered

# A channel name, and commands that PREPARE does not take.
NOT_STATEMENTS = {"NOTIFY_CHANNEL", "COMMIT", "PIN_ORDER", "UNPIN_ORDER", "PIN_PLAN", "UNPIN_PLAN",
                  "PIN_INDEX", "UNPIN_INDEX",
                  "CREATED_TASK_COLUMNS", "_TASK_ARRAYS", "JOB_COLUMNS", "LISTED_RUN_COLUMNS"}
# A statement with a ``{where}`` of its clauses: prepared with all of them.
CLAUSES = {"LIST_JOBS": "LIST_JOBS_WHERE", "LIST_RUNS": "LIST_RUNS_WHERE",
           "LIST_JOB_RUNS": "LIST_JOB_RUNS_WHERE", "READ_JOURNAL": "READ_JOURNAL_WHERE"}


def statements() -> Iterator[tuple[str, str]]:
    """``(name, SQL)`` of every statement, ``text()`` ones rendered with psycopg's style."""
    dialect = create_engine("postgresql+psycopg://").dialect  # no connection is made
    for name, value in sorted(vars(queries).items()):
        if not name.isupper() or name in NOT_STATEMENTS | set(CLAUSES.values()):
            continue
        if isinstance(value, TextClause):
            yield name, str(value.compile(dialect=dialect))
        elif name in CLAUSES:
            yield name, value.format(where=" AND ".join(getattr(queries, CLAUSES[name]).values()))
        else:
            assert isinstance(value, str), f"{name} is neither SQL text nor a string"
            yield name, value


def test_the_placeholders_are_numbered_as_postgresql_takes_them() -> None:
    assert numbered("a = %s AND b = %(x)s OR c = %(x)s AND d = %b") == (
        "a = $1 AND b = $2 OR c = $2 AND d = $3")


@pytest.mark.parametrize(("name", "sql"), list(statements()), ids=[n for n, _ in statements()])
def test_the_statement_prepares_against_the_schema(database_url: str, name: str, sql: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"PREPARE checked AS {numbered(sql)}".encode())
        conn.execute("DEALLOCATE checked")


def test_a_statement_naming_a_missing_column_is_refused(database_url: str) -> None:
    """Guards the check above against passing vacuously."""
    with psycopg.connect(database_url, autocommit=True) as conn, pytest.raises(
        psycopg.errors.UndefinedColumn
    ):
        conn.execute(numbered("PREPARE checked AS SELECT no_such_column FROM runs WHERE id = %s"))


@pytest.mark.parametrize("update", [TaskRunUpdate, RunUpdate], ids=["task_runs", "runs"])
def test_the_engines_row_update_of_every_column_prepares(
    database_url: str, update: type[TaskRunUpdate | RunUpdate],
) -> None:
    """The writer's ``UPDATE ... FROM unnest`` of every column, with its columns' types."""
    table = "task_runs" if update is TaskRunUpdate else "runs"
    columns = update.columns()
    types = tuple(update.sql_type(c) for c in columns)
    with psycopg.connect(database_url, autocommit=True) as conn:
        statement = update_statement(table, columns, types).decode()
        conn.execute(f"PREPARE checked AS {numbered(statement)}".encode())
        conn.execute("DEALLOCATE checked")
