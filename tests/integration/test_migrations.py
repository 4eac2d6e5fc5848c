"""The Alembic migrations build exactly the schema the SQLAlchemy models describe."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, Index, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.schema import CreateIndex, DropIndex

from common.domain.states import RunState, TaskState
from common.persistence import migrations
from common.persistence.db import sqlalchemy_url
from common.persistence.migrate import alembic_config, upgrade
from common.persistence.models import Base
from scheduler.notify.backoff import DeliveryState


@pytest.fixture
def connection(database_url: str) -> Iterator[Connection]:
    """A connection to the session's migrated database; whatever a test does is undone."""
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.connect() as conn:
            yield conn
            conn.rollback()
    finally:
        engine.dispose()


def test_autogenerate_finds_nothing_to_migrate(connection: Connection) -> None:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": True}
    )
    assert compare_metadata(context, Base.metadata) == []


def test_indexes_match_including_partial_predicates(connection: Connection) -> None:
    assert index_drift(connection) == []


def test_index_check_sees_a_dropped_predicate(connection: Connection) -> None:
    """Guards the check above against passing vacuously."""
    partial = next(index for index in _model_indexes() if _predicate(index) is not None)
    columns = ", ".join(column.name for column in partial.columns)
    connection.execute(DropIndex(partial))
    connection.execute(text(f"CREATE INDEX {partial.name} ON {partial.table} ({columns})"))

    assert [name for name, _, _ in index_drift(connection)] == [partial.name]


# Foreign keys whose referencing rows PostgreSQL may scan for: none (``flow_waiters``'
# ``run_id`` had one, and has no foreign key since migration 0020).
UNINDEXED_REFERENCES: set[tuple[str, str]] = set()

# A foreign key whose columns lead no index of its table.
UNINDEXED_FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text, c.conname FROM pg_constraint AS c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace AND NOT EXISTS (
  SELECT 1 FROM pg_index AS i WHERE i.indrelid = c.conrelid
    AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] = c.conkey)
"""


def test_every_foreign_key_leads_an_index(connection: Connection) -> None:
    """Deleting a row has PostgreSQL find the rows referencing it (to cascade, or to
    refuse): without an index on their columns, a scan of the whole referencing table
    for each row deleted. ``task_runs.task_id`` had none: deleting a job of 102 tasks
    beside 250,000 task runs took 1.8 s (4 ms with it)."""
    unindexed = {tuple(row) for row in connection.execute(text(UNINDEXED_FOREIGN_KEYS))}

    assert unindexed == UNINDEXED_REFERENCES


def test_downgrade_to_base_and_upgrade_again(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    command.downgrade(alembic_config(empty_database_url), "base")
    engine = create_engine(sqlalchemy_url(empty_database_url))
    try:
        assert inspect(engine).get_table_names() == ["alembic_version"]
    finally:
        engine.dispose()
    upgrade(empty_database_url)


def index_drift(conn: Connection) -> list[tuple[str, str, str]]:
    """``(name, migrated, modelled)`` for each index whose definitions differ.

    Alembic's autogenerate compares an index's name, columns and uniqueness but not its
    ``postgresql_where`` predicate, so a partial index that lost or changed its WHERE
    goes unseen; and comparing predicate text would report spurious differences,
    because PostgreSQL rewrites it (parentheses, casts). Instead each model index is
    built in place of the migrated one inside a savepoint that is rolled back, and
    PostgreSQL's own ``pg_get_indexdef`` renders both. Missing or extra indexes are
    left to ``compare_metadata``.
    """
    drift = []
    for index in _model_indexes():
        migrated = _indexdef(conn, str(index.name))
        if migrated is None:
            continue
        savepoint = conn.begin_nested()
        conn.execute(DropIndex(index))
        conn.execute(CreateIndex(index))
        modelled = _indexdef(conn, str(index.name))
        savepoint.rollback()
        if modelled != migrated:
            drift.append((str(index.name), migrated, str(modelled)))
    return drift


def _model_indexes() -> list[Index]:
    return [index for table in Base.metadata.sorted_tables for index in table.indexes]


def _predicate(index: Index) -> object:
    return index.dialect_options["postgresql"]["where"]


def _indexdef(conn: Connection, name: str) -> str | None:
    row = conn.execute(
        text("SELECT pg_get_indexdef(to_regclass(:name))"), {"name": name}
    ).scalar_one()
    return str(row) if row is not None else None


def _state_checks() -> ModuleType:
    """Migration 0009, loaded from its file (migrations are no importable package)."""
    path = Path(migrations.__file__).parent / "versions" / "0009_state_checks.py"
    spec = importlib.util.spec_from_file_location("state_checks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_state_checks_list_exactly_the_states_the_code_knows() -> None:
    checks = _state_checks()
    assert set(checks.RUN_STATES) == {state.value for state in RunState}
    assert set(checks.TASK_STATES) == {state.value for state in TaskState}
    assert set(checks.DELIVERY_STATES) == set(get_args(DeliveryState))
    assert set(checks.FIRE_OUTCOMES) == {"run", "skipped", "buffered"}


def test_a_state_no_code_knows_is_refused_by_the_database(connection: Connection) -> None:
    validated = {name: valid for name, valid in connection.execute(text(
        "SELECT conname, convalidated FROM pg_constraint WHERE contype = 'c' "
        "AND conname IN ('ck_runs_state', 'ck_task_runs_state', 'ck_journal_from_state', "
        "'ck_journal_to_state', 'ck_deliveries_state', 'ck_fires_outcome')"
    ))}
    assert validated == dict.fromkeys(validated, True) and len(validated) == 6

    with pytest.raises(IntegrityError, match="ck_journal_to_state"):
        connection.execute(text(
            "INSERT INTO journal (run_id, at, from_state, to_state, reason, actor) "
            "VALUES (gen_random_uuid(), now(), '', 'DONE', '', 'test')"
        ))


def test_names_used_twice_in_a_tenant_keep_the_newest_and_rename_the_others(
    empty_database_url: str,
) -> None:
    """Migration 0012: a name names one job of its tenant; nothing is deleted."""
    upgrade(empty_database_url, "0011")
    rows = [(f"00000000-0000-4000-8000-00000000000{i}", tenant, "nightly", created)
            for i, (tenant, created) in enumerate(
                [("", "2026-01-01"), ("", "2026-02-01"), ("", "2026-03-01"), ("b", "2026-01-01")],
                start=1)]
    engine = create_engine(sqlalchemy_url(empty_database_url))
    try:
        with engine.begin() as conn:
            for job_id, tenant, name, created in rows:
                conn.execute(text(
                    "INSERT INTO jobs (id, name, description, application, type, tenant, "
                    "owner, labels, priority, params, spec, schedule, draft, enabled, version, "
                    "created_at, updated_at) VALUES (:id, :name, '', '', '', :tenant, '', "
                    "'{}', 5, '{}', '{}', '{}', true, true, 1, :at, :at)"),
                    {"id": job_id, "name": name, "tenant": tenant, "at": created})
        upgrade(empty_database_url)
        with engine.connect() as conn:
            names = {str(row[0]): str(row[1])
                     for row in conn.execute(text("SELECT id::text, name FROM jobs"))}
            with pytest.raises(IntegrityError):
                conn.execute(text("UPDATE jobs SET name = 'nightly' WHERE tenant = ''"))
    finally:
        engine.dispose()
    assert names == {
        rows[0][0]: f"nightly-{rows[0][0]}", rows[1][0]: f"nightly-{rows[1][0]}",
        rows[2][0]: "nightly", rows[3][0]: "nightly",
    }
