"""The transactional outbox: messages are written with the change that causes them.

A state change and its messages commit in one transaction (:func:`enqueue`); the relay
publishes them afterwards and deletes each row in the same transaction that locked it.
A crash after publishing and before the delete commits re-sends the row later: a
duplicate, which every consumer ignores; a row is never lost. ``FOR UPDATE SKIP
LOCKED`` lets the engine (its own rows, at once) and every beat (what is left) relay
side by side without sending a row twice in the normal course.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session, sessionmaker

from common.messaging.publisher import Outgoing, Publisher
from common.persistence.models import OutboxMessage


def enqueue(session: Session, messages: Sequence[Outgoing]) -> list[int]:
    """Add messages to the outbox inside the caller's transaction; return their ids."""
    if not messages:
        return []
    rows = [
        {"queue": m.queue, "task_name": m.task_name, "task_id": m.task_id, "payload": m.payload}
        for m in messages
    ]
    result = session.execute(insert(OutboxMessage).returning(OutboxMessage.id), rows)
    return list(result.scalars())


class OutboxRelay:
    """Publishes committed outbox rows to Redis and removes them."""

    def __init__(self, sessions: sessionmaker[Session], publisher: Publisher) -> None:
        self._sessions = sessions
        self._publisher = publisher

    def relay_ids(self, ids: Sequence[int]) -> int:
        """Relay the given rows now (those another relay holds are skipped)."""
        if not ids:
            return 0
        return self._relay(select(OutboxMessage).where(OutboxMessage.id.in_(ids)))

    def relay_pending(self, limit: int = 5000) -> int:
        """Relay whatever is left in the outbox, oldest first."""
        query = select(OutboxMessage).order_by(OutboxMessage.id).limit(limit)
        return self._relay(query)

    def _relay(self, query: object) -> int:
        with self._sessions.begin() as session:
            rows = session.scalars(
                query.with_for_update(skip_locked=True)  # type: ignore[attr-defined]
            ).all()
            if not rows:
                return 0
            self._publisher.publish(
                Outgoing(r.queue, r.task_name, r.payload, r.task_id) for r in rows
            )
            session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_([r.id for r in rows])))
            return len(rows)
