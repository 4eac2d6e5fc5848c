"""Lost attempts: READY attempts whose claimant died before it reported ``started``.

An ACTIVE attempt holds a lease its worker renews (``duties.expire_leases``). Before
``started`` there is no lease: a worker reports an attempt only after 0.2 s, and the
attempts of a bundle chunk are claimed together and wait their turn. A worker killed in
that window leaves the attempt READY, and no queue will ever deliver it again (its
claim is taken). The claim key names the worker (``common.messaging.claims``) and every
live worker or connector keeps a liveness key (``common.messaging.liveness``), so the
beat can tell the three cases apart a lease after the dispatch:

- claimed by a worker that is not live: lost, requeued as the next attempt;
- claimed by a live worker: it is about to start it, check again a lease later;
- not claimed: still waiting in its queue (maybe with no worker at all), which is not
  a loss; check again later, less often.

An attempt is never requeued while its claimant's liveness key exists, so it never
runs twice while its worker lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import redis
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.messaging.keys import claim_key
from common.messaging.liveness import worker_key
from common.persistence.models import TaskRun
from common.persistence.outbox import enqueue
from scheduler.beat.duties import BATCH, _activation

# An attempt nobody has claimed waits in its queue; checking it at every lease would
# cost a row update per waiting attempt per lease under a large backlog.
UNCLAIMED_RECHECK_LEASES = 4


class ClaimHolders:
    """Reads who holds attempts' claims and whether those workers are alive (Redis)."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def holders(self, idempotency_keys: Sequence[str]) -> list[str | None]:
        """The worker holding each attempt's claim; None where nobody has claimed it."""
        if not idempotency_keys:
            return []
        values = self._redis.mget([claim_key(key) for key in idempotency_keys])
        return [_text(value) for value in values]

    def live(self, workers: set[str]) -> set[str]:
        """Those of ``workers`` whose liveness key exists now."""
        names = sorted(workers)
        if not names:
            return set()
        records = self._redis.mget([worker_key(name) for name in names])
        return {name for name, record in zip(names, records, strict=True) if record is not None}


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else None


class LostClaims:
    """The beat duty: requeue READY attempts claimed by workers that are gone."""

    def __init__(self, claims: ClaimHolders, lease_ttl: timedelta) -> None:
        self._claims = claims
        self._lease_ttl = lease_ttl

    def __call__(self, session: Session, now: datetime) -> list[int]:
        """Check the attempts whose claim check is due; signal the lost ones."""
        due = select(TaskRun.id, TaskRun.run_id, TaskRun.name, TaskRun.attempt).where(
            TaskRun.claim_check_at <= now
        ).limit(BATCH).with_for_update(skip_locked=True)
        rows = session.execute(due).all()
        if not rows:
            return []
        holders = self._claims.holders([f"{row.id}:{row.attempt}" for row in rows])
        live = self._claims.live({holder for holder in holders if holder is not None})
        lost, held, waiting = [], [], []
        for row, holder in zip(rows, holders, strict=True):
            if holder is None:
                waiting.append(row.id)
            elif holder in live:
                held.append(row.id)
            else:
                lost.append(row)
        self._recheck(session, held, now + self._lease_ttl)
        self._recheck(session, waiting, now + self._lease_ttl * UNCLAIMED_RECHECK_LEASES)
        self._recheck(session, [row.id for row in lost], None)
        return enqueue(session, [
            _activation(row.run_id, "lease_expired", row.name, row.attempt) for row in lost
        ])

    @staticmethod
    def _recheck(session: Session, ids: list[object], at: datetime | None) -> None:
        if ids:
            session.execute(update(TaskRun).where(TaskRun.id.in_(ids)).values(claim_check_at=at))
