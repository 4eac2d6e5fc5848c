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

from sqlalchemy.orm import Session, sessionmaker

from common.persistence.queries import CLAIM_DELIVERIES, FINISH_DELIVERY, PRUNE_DELIVERIES
from scheduler.notify.backoff import NextStep


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
            rows = session.execute(CLAIM_DELIVERIES, {
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
            row = session.execute(FINISH_DELIVERY, {
                "state": step.state, "due_at": step.due_at, "finished_at": finished,
                "id": claimed.id, "claim": claimed.claim, "at": attempt.at,
                "duration_ms": attempt.duration_ms, "status_code": attempt.status_code,
                "error": attempt.error,
            }).first()
        return row is not None

    def prune(self, before: datetime) -> int:
        """Delete delivered and dead deliveries finished before ``before``."""
        with self._sessions.begin() as session:
            return session.execute(PRUNE_DELIVERIES, {"before": before}).rowcount  # type: ignore[attr-defined,no-any-return]
