"""The transactional outbox: messages are written with the change that causes them.

A state change and its messages commit in one transaction (:func:`enqueue`). Right
after the commit, the writer publishes the messages it holds
(:meth:`OutboxRelay.publish_written`) and deletes their rows in its next transaction;
a crash in between leaves the rows, and the beat's
:meth:`OutboxRelay.relay_pending` sends whatever has been left for longer than a grace
period, deleting each row in the transaction that locked it. A row is never
lost; it can be sent twice only after a crash or a writer slower than the grace
period, and every consumer ignores a duplicate.

A row may carry ``due_at``: a message that must not go out before then (a run's start,
a retry after its backoff). The beat writes such rows ahead of time and publishes them
on time itself (:meth:`OutboxRelay.relay_due` hands it those not yet due); other
relays leave a timed row alone until it is overdue by their grace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.bundling import bundle_dispatches
from common.messaging.publisher import Outgoing, Publisher
from common.persistence.db import driver
from common.persistence.models import OutboxMessage


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
    due = list(due_at) if due_at is not None else [None] * len(messages)
    columns = (
        [m.queue for m in messages], [m.task_name for m in messages],
        [m.task_id for m in messages], [json.dumps(m.payload) for m in messages], due,
    )
    return [row[0] for row in driver(session).execute(INSERT, columns)]


INSERT = (
    "INSERT INTO outbox (queue, task_name, task_id, payload, due_at) "
    "SELECT q, n, i, p::jsonb, d FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::timestamptz[]) AS m(q, n, i, p, d) RETURNING id"
)
SELECT_FOR_RELAY = (
    "SELECT id, queue, task_name, task_id, payload, due_at FROM outbox "
    "WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED"
)


@dataclass(frozen=True)
class Deferred:
    """An outbox row not due yet: its caller publishes it at ``due_at`` and forgets it."""

    id: int
    due_at: datetime
    message: Outgoing


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
        if not ids:
            return 0
        return self._relay(select(OutboxMessage).where(OutboxMessage.id.in_(ids)))

    def publish_written(self, messages: Sequence[Outgoing]) -> None:
        """Publish messages whose rows the caller has just committed.

        No lock and no re-read: the caller still holds the messages, and deletes their
        rows afterwards, in its next transaction. The beat leaves rows
        younger than its grace period alone, so it does not race this.
        """
        self._publisher.publish(bundle_dispatches(messages, self._bundle_size))

    def relay_due(self, ids: Sequence[int], now: datetime) -> list[Deferred]:
        """Relay the given rows that are due by ``now``; return the others, kept."""
        if not ids:
            return []
        with self._sessions.begin() as session:
            rows = driver(session).execute(SELECT_FOR_RELAY, (list(ids),)).fetchall()
            due = [r for r in rows if r[5] is None or r[5] <= now]
            self._publisher.publish(bundle_dispatches(
                (_from_row(r) for r in due), self._bundle_size))
            if due:
                session.execute(
                    delete(OutboxMessage).where(OutboxMessage.id.in_([r[0] for r in due])))
        return [Deferred(r[0], r[5], _from_row(r)) for r in rows
                if r[5] is not None and r[5] > now]

    def relay_pending(self, min_age: timedelta = timedelta(0), limit: int = 5000) -> int:
        """Relay rows left in the outbox for at least ``min_age``, oldest first.

        A timed row counts from its ``due_at``: it is never sent early.
        """
        since = func.coalesce(OutboxMessage.due_at, OutboxMessage.created_at)
        query = select(OutboxMessage).where(since <= func.now() - min_age)
        return self._relay(query.order_by(OutboxMessage.id).limit(limit))

    def _relay(self, query: object) -> int:
        with self._sessions.begin() as session:
            rows = session.scalars(
                query.with_for_update(skip_locked=True)  # type: ignore[attr-defined]
            ).all()
            if not rows:
                return 0
            messages = (_outgoing(r) for r in rows)
            self._publisher.publish(bundle_dispatches(messages, self._bundle_size))
            session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_([r.id for r in rows])))
            return len(rows)


def _outgoing(row: OutboxMessage) -> Outgoing:
    return Outgoing(row.queue, row.task_name, row.payload, row.task_id)


def _from_row(row: Any) -> Outgoing:
    """The message of a :data:`SELECT_FOR_RELAY` row."""
    _, queue, task_name, task_id, payload, _ = row
    return Outgoing(queue, task_name, payload, task_id)
