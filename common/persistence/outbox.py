"""The transactional outbox: messages are written with the change that causes them.

A state change and its messages commit in one transaction (:func:`enqueue`). Right
after the commit, the writer publishes the messages it holds
(:meth:`OutboxRelay.publish_written`) and deletes their rows in its next transaction;
a crash in between leaves the rows, and the beat's
:meth:`OutboxRelay.relay_pending` sends whatever has been left for longer than a grace
period, deleting each row in the transaction that locked it. A row is never
lost; it can be sent twice only after a crash or a writer slower than the grace
period, and every consumer ignores a duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.bundling import bundle_dispatches
from common.messaging.publisher import Outgoing, Publisher
from common.persistence.models import OutboxMessage, table_of


def enqueue(session: Session, messages: Sequence[Outgoing]) -> list[int]:
    """Add messages to the outbox inside the caller's transaction; return their ids."""
    if not messages:
        return []
    rows = [
        {"queue": m.queue, "task_name": m.task_name, "task_id": m.task_id, "payload": m.payload}
        for m in messages
    ]
    table = table_of(OutboxMessage)
    result = session.connection().execute(insert(table).returning(table.c.id), rows)
    return list(result.scalars())


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

    def relay_pending(self, min_age: timedelta = timedelta(0), limit: int = 5000) -> int:
        """Relay rows left in the outbox for at least ``min_age``, oldest first."""
        query = select(OutboxMessage).order_by(OutboxMessage.id).limit(limit)
        if min_age > timedelta(0):
            query = query.where(OutboxMessage.created_at < func.now() - min_age)
        return self._relay(query)

    def _relay(self, query: object) -> int:
        with self._sessions.begin() as session:
            rows = session.scalars(
                query.with_for_update(skip_locked=True)  # type: ignore[attr-defined]
            ).all()
            if not rows:
                return 0
            messages = (Outgoing(r.queue, r.task_name, r.payload, r.task_id) for r in rows)
            self._publisher.publish(bundle_dispatches(messages, self._bundle_size))
            session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_([r.id for r in rows])))
            return len(rows)
