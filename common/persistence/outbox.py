"""The transactional outbox: messages are written with the change that causes them.

This module owns the outbox table (issue 15): every statement that writes, reads or
deletes its rows is sent from here (their text is in ``common.persistence.queries``).
Rows are written by :func:`enqueue` in the caller's transaction, or by
:func:`enqueue_on` on a cursor of the engine's pipelined writer (the same statement,
sent with the rest of its batch). They are deleted by :func:`forget` (one statement)
wherever that happens. :class:`OutboxRelay` has one way to publish (``_publish``) and
one way to relay rows (lock, publish, delete in one transaction); its public methods
only choose what: rows by id (:meth:`~OutboxRelay.relay_ids`), by id and due
(:meth:`~OutboxRelay.relay_due`), left behind (:meth:`~OutboxRelay.relay_pending`), or
messages the caller still holds (:meth:`~OutboxRelay.publish_written`).

A state change and its messages commit in one transaction. Right after the commit, the
writer publishes the messages it holds (:meth:`OutboxRelay.publish_written`) and deletes
their rows in its next transaction (:func:`forget`, or :func:`forget_published` when
idle); a crash in between leaves the rows, and the beat's
:meth:`OutboxRelay.relay_pending` sends whatever has been left for longer than a grace
period, deleting each row in the transaction that locked it. A row is never lost; it can
be sent twice only after a crash or a writer slower than the grace period, and every
consumer ignores a duplicate.

A row may carry ``due_at``: a message that must not be consumed before then (a run's
start, a retry after its backoff). The beat writes such rows ahead of time and relays
them at once with :meth:`OutboxRelay.relay_due`, which puts those not yet due into
their queue's timed set in Redis, where the consumer takes each once due. A relay of
rows left behind (:meth:`OutboxRelay.relay_pending`) leaves a timed row alone until it
is overdue by its grace.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from redis.client import Pipeline
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.bundling import bundle_dispatches
from common.messaging.publisher import Outgoing, Publisher
from common.persistence.arrays import literal, literals
from common.persistence.db import driver
from common.persistence.json_text import json_text
from common.persistence.pipelined import Executes, Rows
from common.persistence.queries import (
    DELETE_OUTBOX,
    INSERT_OUTBOX,
    LOCK_OUTBOX_IDS,
    LOCK_PENDING_OUTBOX,
)


def enqueue(
    session: Session, messages: Sequence[Outgoing],
    due_at: Sequence[datetime | None] | None = None,
) -> list[int]:
    """Add messages to the outbox inside the caller's transaction; return their ids.

    ``due_at``, one per message, holds a message back until then (see the module doc).
    One statement with arrays, whatever the count: the beat writes hundreds at a time.
    """
    if not messages:
        return []
    with driver(session).cursor() as cur:
        return written_ids(enqueue_on(cur, messages, due_at))


def enqueue_on(
    cur: Executes, messages: Sequence[Outgoing],
    due_at: Sequence[datetime | None] | None = None,
) -> Rows:
    """Send the outbox rows' statement on ``cur``, which may be in a pipeline.

    The ids are read from what it returns with :func:`written_ids` (after the
    pipeline's sync).
    """
    due = list(due_at) if due_at is not None else [None] * len(messages)
    reply: Rows = cur.execute(INSERT_OUTBOX, literals((
        [m.queue for m in messages], [m.task_name for m in messages],
        [m.task_id for m in messages], [json_text(m.payload) for m in messages], due,
    )))
    return reply


def written_ids(reply: Rows) -> list[int]:
    """The ids of the rows :func:`enqueue_on` wrote, from what it returned."""
    return [row[0] for row in reply.fetchall()]


def forget(conn: Executes, ids: Sequence[int]) -> None:
    """Delete outbox rows (published, or being published in this transaction)."""
    if ids:
        conn.execute(DELETE_OUTBOX, (literal(ids),))


def forget_published(session: Session, ids: Sequence[int]) -> None:
    """Delete published outbox rows in a transaction of their own (the engine is idle).

    Without waiting for the WAL flush: losing this delete in a server crash costs a
    duplicate relay, which every consumer ignores.
    """
    if ids:
        conn = driver(session)
        conn.execute("SET LOCAL synchronous_commit = off")
        forget(conn, ids)


class OutboxRelay:
    """Publishes committed outbox rows to Redis and removes them.

    Dispatches to one queue go out in bundles of up to ``bundle_size`` (see
    ``common.messaging.bundling``); the rows stay one per attempt.
    """

    def __init__(
        self, sessions: sessionmaker[Session], publisher: Publisher, bundle_size: int = 1
    ) -> None:
        self._sessions = sessions
        self._publisher = publisher
        self._bundle_size = bundle_size

    def relay_ids(self, ids: Sequence[int]) -> int:
        """Relay the given rows now (those another relay holds are skipped)."""
        return self._relay(LOCK_OUTBOX_IDS, (literal(ids),)) if ids else 0

    def publish_written(self, messages: Sequence[Outgoing]) -> None:
        """Publish messages whose rows the caller has just committed.

        No lock and no re-read: the caller still holds the messages, and deletes their
        rows afterwards, in its next transaction. The beat leaves rows
        younger than its grace period alone, so it does not race this.
        """
        self._publish(messages)

    def relay_due(self, ids: Sequence[int], now: datetime) -> int:
        """Relay the given rows: those due by ``now`` to their queues, the others timed.

        A row due later goes into its queue's timed set (``publisher.timed_set``), from
        which a consumer takes it once due; either way its row is deleted.
        """
        return self._relay(LOCK_OUTBOX_IDS, (literal(ids),), now) if ids else 0

    def relay_pending(self, min_age: timedelta = timedelta(0), limit: int = 5000) -> int:
        """Relay rows left in the outbox for at least ``min_age``, oldest first.

        A timed row counts from its ``due_at``: it is never sent early.
        """
        return self._relay(LOCK_PENDING_OUTBOX, (min_age, limit))

    def _relay(self, query: str, params: Any, now: datetime | None = None) -> int:
        """Lock the selected rows, publish them (timed if due after ``now``), delete them."""
        with self._sessions.begin() as session:
            conn = driver(session)
            rows = conn.execute(query, params).fetchall()
            due, later = _by_due(rows, now)
            if rows:
                self._publish([_from_row(r) for r in due],
                              [(r[5], _from_row(r)) for r in later])
                forget(conn, [r[0] for r in rows])
        return len(rows)

    def push(self, pipe: Pipeline, messages: Sequence[Outgoing]) -> None:
        """:meth:`publish_written`, added to a pipeline that carries other commands too."""
        self._publisher.push(pipe, bundle_dispatches(messages, self._bundle_size))

    def _publish(
        self, messages: Sequence[Outgoing], later: Sequence[tuple[datetime, Outgoing]] = (),
    ) -> None:
        """The one way out: dispatches bundled per queue, every message in order."""
        self._publisher.publish(bundle_dispatches(messages, self._bundle_size), later)


def _by_due(rows: Sequence[Any], now: datetime | None) -> tuple[list[Any], list[Any]]:
    """Rows due by ``now`` (all of them without), and the others: one pass."""
    due: list[Any] = []
    later: list[Any] = []
    for row in rows:
        (later if now is not None and row[5] is not None and row[5] > now else due).append(row)
    return due, later


def _from_row(row: Any) -> Outgoing:
    """The message of a ``LOCK_OUTBOX_IDS`` or ``LOCK_PENDING_OUTBOX`` row."""
    _, queue, task_name, task_id, payload, _ = row
    return Outgoing(queue, task_name, payload, task_id)
