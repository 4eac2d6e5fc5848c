"""The delivery rows: claimed with a lease, finished with an attempt log, pruned.

A runner claims due deliveries with ``FOR UPDATE SKIP LOCKED`` (several runners never
take the same one), the events of one run to one subscription one at a time and in
order, and commits the claim before sending: the claim moves ``due_at`` to
the end of a lease and stamps the row with a claim token. A runner killed while sending
leaves the row pending; once the lease has passed any runner takes it again. The
outcome is written only by the holder of the token, so a runner that outlived its
lease cannot overwrite the attempt of the one that took over.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from scheduler.notify.backoff import NextStep

# Only the oldest pending delivery of a (subscription, run) may go: while it is in flight
# (its due_at is its lease's end) or waits for a retry, the run's later events wait too.
CLAIM = text(
    "UPDATE deliveries AS d SET due_at = :lease_end, claim = :claim "
    "FROM (SELECT id FROM deliveries AS p WHERE state = 'pending' AND due_at <= :now "
    "      AND NOT EXISTS (SELECT 1 FROM deliveries AS e WHERE e.state = 'pending' "
    "        AND e.subscription_id = p.subscription_id AND e.run_id = p.run_id "
    "        AND e.seq < p.seq) "
    "      ORDER BY due_at, seq LIMIT :limit FOR UPDATE SKIP LOCKED) AS c, "
    "     subscriptions AS s "
    "WHERE d.id = c.id AND s.id = d.subscription_id "
    "RETURNING d.id, d.subscription_id, d.event_id, d.event, d.payload, d.attempts, "
    "s.target, s.url, s.sealed_secret, s.sealed_headers, s.celery_task, s.queue"
)
FINISH = text(
    "WITH done AS ("
    "  UPDATE deliveries SET state = :state, attempts = attempts + 1, due_at = :due_at, "
    "  claim = NULL, finished_at = :finished_at WHERE id = :id AND claim = :claim "
    "  RETURNING id, attempts) "
    "INSERT INTO delivery_attempts (delivery_id, number, at, duration_ms, status_code, error) "
    "SELECT id, attempts, :at, :duration_ms, :status_code, :error FROM done RETURNING id"
)
PRUNE = text(
    "DELETE FROM deliveries WHERE state IN ('delivered', 'dead') AND finished_at < :before"
)


@dataclass(frozen=True)
class Claimed:
    """A delivery a runner holds, with what it needs to send it."""

    id: UUID
    subscription_id: UUID
    event_id: UUID
    event: str
    payload: dict[str, Any]
    attempt: int  # the number of the try about to be made (1 for the first)
    claim: UUID
    target: str
    url: str | None
    sealed_secret: str | None
    sealed_headers: str | None
    celery_task: str | None
    queue: str | None


@dataclass(frozen=True)
class Attempt:
    """One try: when it started, how long it took, the HTTP status or the error."""

    at: datetime
    duration_ms: float
    status_code: int | None = None
    error: str = ""

    @property
    def summary(self) -> str:
        """``HTTP 503``, ``HTTP 200`` or the error, for the log."""
        if self.status_code is not None:
            return f"HTTP {self.status_code}" + (f" ({self.error})" if self.error else "")
        return self.error or "sent"


class DeliveryStore:
    """Claims and finishes deliveries, each in a short transaction of its own."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        """Use ``sessions`` for every transaction."""
        self._sessions = sessions

    def claim(self, limit: int, now: datetime, lease: timedelta) -> list[Claimed]:
        """Up to ``limit`` due deliveries, held until ``now + lease`` (oldest due first)."""
        if limit <= 0:
            return []
        token = uuid4()
        with self._sessions.begin() as session:
            rows = session.execute(CLAIM, {
                "lease_end": now + lease, "claim": token, "now": now, "limit": limit,
            }).all()
        return [Claimed(
            id=r.id, subscription_id=r.subscription_id, event_id=r.event_id, event=r.event,
            payload=r.payload, attempt=r.attempts + 1, claim=token, target=r.target,
            url=r.url, sealed_secret=r.sealed_secret, sealed_headers=r.sealed_headers,
            celery_task=r.celery_task, queue=r.queue,
        ) for r in rows]

    def finish(self, claimed: Claimed, attempt: Attempt, step: NextStep) -> bool:
        """Record the try and the delivery's next state; False if the claim was lost."""
        ended = attempt.at + timedelta(milliseconds=attempt.duration_ms)
        finished = ended if step.state != "pending" else None
        with self._sessions.begin() as session:
            row = session.execute(FINISH, {
                "state": step.state, "due_at": step.due_at, "finished_at": finished,
                "id": claimed.id, "claim": claimed.claim, "at": attempt.at,
                "duration_ms": attempt.duration_ms, "status_code": attempt.status_code,
                "error": attempt.error,
            }).first()
        return row is not None

    def prune(self, before: datetime) -> int:
        """Delete delivered and dead deliveries finished before ``before``."""
        with self._sessions.begin() as session:
            return session.execute(PRUNE, {"before": before}).rowcount  # type: ignore[attr-defined,no-any-return]
