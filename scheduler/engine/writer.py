"""Writing a batch's rows (``changes.Rows``): hand-written SQL, one pipelined round trip.

This is the engine's hot path. Built with SQLAlchemy, a batch cost about 11 ms of
Python for 2 ms of database work (statement construction, compilation, result
processing for some ten statements); as fixed SQL strings sent through psycopg's
pipeline mode, all writes of a batch go to the server together. They go on libpq's
pipeline directly (``common.persistence.pipelined``): psycopg's cursors cost 45-60 µs
of CPU a statement around libpq's ~11.
"""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import Connection as PgConnection
from psycopg import sql
from psycopg.types.json import Jsonb

from common.messaging.publisher import Outgoing
from common.persistence.arrays import literal, literals
from common.persistence.json_text import json_text
from common.persistence.notify_events import fields_json
from common.persistence.outbox import enqueue_on, forget, written_ids
from common.persistence.pipelined import Pipelined
from common.persistence.queries import (
    CLAIM_MESSAGES,
    COMMIT,
    INSERT_JOURNAL,
    INSERT_LOG,
    RECORD_NOTIFY_EVENTS,
    RECORD_SUCCESSES,
    UPSERT_STORAGE,
)
from scheduler.engine.changes import Rows
from scheduler.engine.loading import RunRecord
from scheduler.engine.rows import RunUpdate, TaskRunUpdate

UNCHANGED_RUN = RunUpdate()


def claim_messages(conn: PgConnection[Any], ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Record message ids as consumed; return those not seen before (one statement)."""
    if not ids:
        return set()
    return {row[0] for row in conn.execute(CLAIM_MESSAGES, (literal(ids),))}


def write(
    conn: PgConnection[Any], runs: list[RunRecord], rows: Rows, messages: list[Outgoing],
    published: list[int],
) -> list[int]:
    """Persist every row of the batch and its ``messages``, forget ``published`` rows, commit.

    Returns the ids of the outbox rows written, in the order of ``messages``.
    The batch's notify events go into one ``notify_events`` row (each run's in order),
    in the same pipeline: one statement more, no round trip more.

    The ``COMMIT`` ends the same pipeline, which saves the round trip of a commit of its
    own; the caller's commit that follows finds the connection idle and sends nothing
    (psycopg does not). Any statement that failed aborts the rest of the pipeline, the
    ``COMMIT`` with it, and the caller's transaction rolls back as before.
    """
    outbox = None
    with Pipelined(conn) as cur:
        forget(cur, published)
        _write_updates(cur, "task_runs", rows.task_runs)
        _write_runs(cur, runs, rows)
        if rows.journal:
            cur.execute(INSERT_JOURNAL, literals(_columns_of(rows.journal)))
        if rows.logs:
            cur.execute(INSERT_LOG, literals(_columns_of(rows.logs)))
        for job_id, data in rows.storage.items():
            cur.execute(UPSERT_STORAGE, (job_id, Jsonb(data), rows.now))
        if rows.successes:
            cur.execute(RECORD_SUCCESSES, literals(_columns_of(
                [(start, finish, job_id) for job_id, (start, finish) in rows.successes.items()])))
        if rows.events:
            cur.execute(RECORD_NOTIFY_EVENTS, (fields_json(rows.events),))
        rows.flow.write(cur)
        if messages:  # the outbox's own statement (common.persistence.outbox), one for all
            outbox = enqueue_on(cur, messages)
        cur.execute(COMMIT)
    return written_ids(outbox) if outbox is not None else []


@functools.cache
def update_statement(
    table: str, columns: tuple[str, ...], types: tuple[str, ...], extra: str = ""
) -> bytes:
    """``UPDATE`` of many rows from one array per column: one statement for the group.

    One statement rather than one per row: PostgreSQL prepares a table's CHECK
    constraints once per statement, which cost more than the update itself when each
    row was its own statement. Kept as bytes: psycopg composed the ``sql.Composed``
    again on every execute (4-5% of the engine's CPU at 250 fires a second).
    """
    assignments: list[sql.Composable] = [
        sql.SQL("{} = u.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in columns
    ]
    if extra:
        assignments.append(sql.SQL(extra))
    arrays = [sql.SQL("%b::uuid[]"), *(sql.SQL(f"%b::{t}[]") for t in types)]
    return sql.SQL("UPDATE {} AS t SET {} FROM unnest({}) AS u(id, {}) WHERE t.id = u.id").format(
        sql.Identifier(table), sql.SQL(", ").join(assignments), sql.SQL(", ").join(arrays),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
    ).as_bytes(None)


def _write_updates(
    cur: Any, table: str, updates: Mapping[uuid.UUID, TaskRunUpdate | RunUpdate], extra: str = ""
) -> None:
    """One statement per distinct set of columns, each column sent as one array literal."""
    groups: dict[tuple[str, ...], list[tuple[uuid.UUID, TaskRunUpdate | RunUpdate]]] = (
        defaultdict(list))
    # Rows may share one (immutable) update: flow control's let-through dispatches do.
    seen: dict[int, tuple[str, ...]] = {}
    for row_id, update in updates.items():
        columns = seen.get(id(update))
        if columns is None:
            columns = seen[id(update)] = update.set_columns()
        groups[columns].append((row_id, update))
    for columns, rows in groups.items():
        if not columns and not extra:
            continue
        types = tuple(rows[0][1].sql_type(c) for c in columns)
        arrays = [literal(row_id for row_id, _ in rows)]
        for name, sql_type in zip(columns, types, strict=True):
            values = [getattr(update, name) for _, update in rows]
            if sql_type == "jsonb":
                values = [None if v is None else json_text(v) for v in values]
            arrays.append(literal(values))
        cur.execute(update_statement(table, columns, types, extra), arrays)


def _write_runs(cur: Any, runs: list[RunRecord], rows: Rows) -> None:
    """Every locked run gets its version bumped (the snapshot caches key on it)."""
    stamp = {"updated_at": rows.now}
    touched = {run.id: rows.runs.get(run.id, UNCHANGED_RUN).with_columns(stamp) for run in runs}
    _write_updates(cur, "runs", touched, "version = t.version + 1")
    for run in runs:
        run.version += 1


def _columns_of(rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """Rows as one list per column, for an ``unnest`` insert."""
    return [list(values) for values in zip(*rows, strict=True)]
