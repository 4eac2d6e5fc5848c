"""Lost attempts: the beat requeues what a dead worker held, and nothing a live one holds.

Every live worker or connector keeps a liveness key (``common.messaging.liveness``,
TTL ``LIVENESS_TTL``), and the claim key of an attempt names its claimant
(``common.messaging.claims``). Two duties use them:

- :class:`ExpiredLeases`: an ACTIVE attempt whose lease passed (no heartbeat applied
  for ``lease_ttl``) is requeued as the next attempt only if its worker's liveness key
  is gone. A lease also passes when the worker is fine but its heartbeats cannot reach
  the engine (Redis or PostgreSQL away for a while, an engine backlog); requeueing then
  ran the attempt twice. A live worker's attempt is looked at again a second later.
- :class:`LostClaims`: a READY attempt (a worker reports ``started`` only after 0.2 s,
  and the attempts of a bundle chunk are claimed together and wait their turn) claimed
  by a worker that is not live is lost and requeued; one claimed by a live worker is
  about to start, checked again a second later; one nobody claimed still waits in its
  queue (maybe with no worker at all), checked again later, less often.

Neither judges a worker dead while the Redis epoch (``common.messaging.epoch``) is
younger than the liveness TTL: after Redis restarted empty every liveness key is gone
until its worker writes it again, which a live worker does within a refresh.
A worker dies → its key expires within ``LIVENESS_TTL`` (6 s) → its attempts are
requeued at the next full tick: within about 7 s with the default settings.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.messaging.claims import ClaimHolders
from common.messaging.keys import attempt_key
from common.messaging.liveness import LIVENESS_TTL
from common.messaging.signals import activation
from common.persistence.models import TaskRun
from common.persistence.outbox import enqueue
from scheduler.beat.duties import BATCH

# An attempt nobody has claimed waits in its queue; checking it at every lease would
# cost a row update per waiting attempt per lease under a large backlog.
UNCLAIMED_RECHECK_LEASES = 4
# An attempt of a live worker whose lease passed, or that it claimed and has not begun,
# is looked at again this soon: its worker may die any moment, and is then caught
# within this of its liveness key's expiry (judging again a lease later cost up to a
# whole lease more: dead workers' attempts requeued after 12 s instead of 6).
RECHECK_LIVE = timedelta(seconds=1)


class ExpiredLeases:
    """The beat duty: requeue ACTIVE attempts whose lease passed and whose worker is gone."""

    def __init__(
        self, claims: ClaimHolders, lease_ttl: timedelta, epoch_age: Callable[[], timedelta]
    ) -> None:
        """``epoch_age``: how long Redis has held its data (``Epoch.age``)."""
        self._claims = claims
        self._lease_ttl = lease_ttl
        self._epoch_age = epoch_age

    def __call__(self, session: Session, now: datetime) -> list[int]:
        """Look again soon at live workers' attempts; signal the others.

        A signalled lease is renewed too: if the signal is lost (Redis restarted empty)
        it goes again a lease later, and the engine ignores it once the attempt moved on.
        """
        due = select(TaskRun.id, TaskRun.run_id, TaskRun.name, TaskRun.attempt,
                     TaskRun.worker).where(TaskRun.lease_expires_at <= now)
        rows = session.execute(due.limit(BATCH).with_for_update(skip_locked=True)).all()
        if not rows:
            return []
        young = LIVENESS_TTL - self._epoch_age()
        if young > timedelta(0):  # liveness keys may not be back yet: judge nobody
            _set(session, TaskRun.lease_expires_at, [r.id for r in rows], now + young)
            return []
        live = self._claims.live({row.worker for row in rows if row.worker})
        lost = [row for row in rows if row.worker not in live]
        _set(session, TaskRun.lease_expires_at, [r.id for r in rows if r.worker in live],
             now + RECHECK_LIVE)
        _set(session, TaskRun.lease_expires_at, [r.id for r in lost], now + self._lease_ttl)
        return enqueue(session, [
            activation(row.run_id, "lease_expired", row.name, row.attempt) for row in lost
        ])


class LostClaims:
    """The beat duty: requeue READY attempts claimed by workers that are gone."""

    def __init__(
        self, claims: ClaimHolders, lease_ttl: timedelta,
        epoch_age: Callable[[], timedelta] = lambda: LIVENESS_TTL,
    ) -> None:
        """``epoch_age``: how long Redis has held its data (``Epoch.age``)."""
        self._claims = claims
        self._lease_ttl = lease_ttl
        self._epoch_age = epoch_age

    def __call__(self, session: Session, now: datetime) -> list[int]:
        """Check the attempts whose claim check is due; signal the lost ones."""
        due = select(TaskRun.id, TaskRun.run_id, TaskRun.name, TaskRun.attempt).where(
            TaskRun.claim_check_at <= now
        ).limit(BATCH).with_for_update(skip_locked=True)
        rows = session.execute(due).all()
        if not rows:
            return []
        young = LIVENESS_TTL - self._epoch_age()
        if young > timedelta(0):  # liveness keys may not be back yet: judge nobody
            _set(session, TaskRun.claim_check_at, [r.id for r in rows], now + young)
            return []
        holders = self._claims.holders([attempt_key(row.id, row.attempt) for row in rows])
        live = self._claims.live({holder for holder in holders if holder is not None})
        lost, held, waiting = [], [], []
        for row, holder in zip(rows, holders, strict=True):
            if holder is None:
                waiting.append(row.id)
            elif holder in live:
                held.append(row.id)
            else:
                lost.append(row)
        _set(session, TaskRun.claim_check_at, held, now + RECHECK_LIVE)
        _set(session, TaskRun.claim_check_at, waiting,
             now + self._lease_ttl * UNCLAIMED_RECHECK_LEASES)
        _set(session, TaskRun.claim_check_at, [row.id for row in lost], None)
        return enqueue(session, [
            activation(row.run_id, "lease_expired", row.name, row.attempt) for row in lost
        ])


def _set(session: Session, column: Any, ids: list[Any], at: datetime | None) -> None:
    """Set a due-time column of the task runs ``ids``."""
    if ids:
        session.execute(update(TaskRun).where(TaskRun.id.in_(ids)).values({column: at}))
