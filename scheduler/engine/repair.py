"""Repair on start: finish what a crash left half-done (SPEC §3, Repair).

Called by ``stellwerk engine`` when it starts, after the outbox relay has re-sent what a
crashed writer left. Each repair is a signal through the activation queue, so the
engine applies it like any other message (row lock, pure ``advance``, journal, outbox);
running it twice changes nothing more, because every signal names what it expects
(a state, an attempt) and the engine ignores it when that no longer holds.

- Runs in CANCEL_REQUESTED or PAUSE_REQUESTED with no ACTIVE task: the transition to
  CANCELED / PAUSED was decided but not written (``reconcile`` settles them).
- READY attempts nobody has claimed: their dispatch may never have reached the queue
  (lost from Redis, or in the unacknowledged set of a worker that died holding a
  bundle, which the broker gives back only after its visibility timeout). They are
  dispatched again under the same attempt number; a copy still waiting in the queue
  is skipped by the worker's claim, so at most one runs.
- Expired leases and attempts past their timeout: the beat's duties, run once now.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import redis
from sqlalchemy import exists, select
from sqlalchemy.orm import Session, sessionmaker

from common.domain.states import RunState, TaskState
from common.persistence.models import Run, TaskRun
from common.persistence.outbox import OutboxRelay, enqueue
from scheduler.beat import duties
from scheduler.beat.attempts import ClaimHolders
from scheduler.beat.duties import BATCH, _activation

log = logging.getLogger(__name__)
STOPPING = (RunState.CANCEL_REQUESTED.value, RunState.PAUSE_REQUESTED.value)


def repair_on_start(
    sessions: sessionmaker[Session], relay: OutboxRelay, client: redis.Redis,
    clock: Callable[[], datetime],
) -> int:
    """Signal every repair that is due; return how many messages were sent."""
    with sessions.begin() as session:
        now = clock()
        ids = duties.expire_leases(session, now) + duties.time_out_attempts(session, now)
        ids += settle_stopping_runs(session)
        ids += redeliver_unclaimed(session, ClaimHolders(client))
    sent = relay.relay_ids(ids)
    if ids:
        log.info("repair on start: %d signals sent", len(ids))
    return sent


def settle_stopping_runs(session: Session) -> list[int]:
    """``reconcile`` for runs stopping (cancel, pause) with no task left running."""
    active = exists().where(TaskRun.run_id == Run.id, TaskRun.state == TaskState.ACTIVE.value)
    ids = session.scalars(select(Run.id).where(Run.state.in_(STOPPING), ~active))
    return enqueue(session, [_activation(run_id, "reconcile") for run_id in ids])


def redeliver_unclaimed(session: Session, claims: ClaimHolders) -> list[int]:
    """``redeliver`` for READY attempts whose claim nobody holds."""
    query = select(TaskRun.id, TaskRun.run_id, TaskRun.name, TaskRun.attempt).where(
        TaskRun.state == TaskState.READY.value
    ).order_by(TaskRun.id)
    rows = session.execute(query).all()
    messages = []
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        holders = claims.holders([f"{row.id}:{row.attempt}" for row in chunk])
        messages += [
            _activation(row.run_id, "redeliver", row.name, row.attempt)
            for row, holder in zip(chunk, holders, strict=True) if holder is None
        ]
    return enqueue(session, messages)
