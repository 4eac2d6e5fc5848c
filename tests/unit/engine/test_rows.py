"""The engine's typed rows name real columns, and fold as a batch's changes do."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

from common.domain.states import TaskState
from common.persistence import queries
from common.persistence.models import JournalEntry, Run, TaskLog, TaskRun
from scheduler.engine.rows import (
    KEEP,
    JournalRow,
    LogRow,
    RunUpdate,
    TaskRunUpdate,
    entered,
    lease_renewed,
    retry_scheduled,
)

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)


def inserted_columns(statement: str) -> tuple[str, ...]:
    match = re.match(r"INSERT INTO \w+ \(([^)]*)\)", statement)
    assert match is not None, statement
    return tuple(name.strip() for name in match.group(1).split(","))


def test_every_field_of_an_update_is_a_column_of_its_table() -> None:
    assert set(TaskRunUpdate.columns()) <= set(TaskRun.__table__.columns.keys())
    assert set(RunUpdate.columns()) <= set(Run.__table__.columns.keys())


def test_the_inserted_rows_are_the_statements_columns_in_order() -> None:
    assert JournalRow._fields == inserted_columns(queries.INSERT_JOURNAL)
    assert LogRow._fields == inserted_columns(queries.INSERT_LOG)
    assert set(JournalRow._fields) <= set(JournalEntry.__table__.columns.keys())
    assert set(LogRow._fields) <= set(TaskLog.__table__.columns.keys())


def test_an_update_sets_only_the_columns_its_change_names() -> None:
    assert lease_renewed(NOW).set_columns() == ("lease_expires_at",)
    assert RunUpdate().set_columns() == ()


def test_a_later_change_overrides_only_what_it_sets() -> None:
    ready = entered(TaskState.READY, 1, 0, started=None, finished_at=KEEP, outcome=None)
    active = entered(TaskState.ACTIVE, 1, 0, started=(NOW, "w1"), finished_at=KEEP,
                     outcome=None)
    done = entered(TaskState.COMPLETED, 1, 0, started=None, finished_at=NOW,
                   outcome=({"n": 1}, "ok"))
    row = ready.then(active).then(done)
    assert (row.state, row.worker, row.started_at) == ("COMPLETED", "w1", NOW)
    assert (row.finished_at, row.output, row.message) == (NOW, {"n": 1}, "ok")
    assert row.retry_at is None  # cleared by READY, set by nothing later


def test_a_retry_after_a_failure_keeps_the_failures_columns() -> None:
    failed = entered(TaskState.FAILED, 1, 0, started=None, finished_at=NOW,
                     outcome=(None, "boom"))
    later = NOW + timedelta(seconds=30)
    row = failed.then(retry_scheduled(later))
    assert (row.state, row.message, row.retry_at) == ("FAILED", "boom", later)
    assert row.lease_expires_at is KEEP


def test_a_journal_row_is_the_tuple_the_statement_takes() -> None:
    run_id = uuid.uuid4()
    row = JournalRow(run_id, None, None, NOW, "READY", "ACTIVE", "started", "engine")
    assert tuple(row)[0] == run_id and len(row) == queries.INSERT_JOURNAL.count("%b")
