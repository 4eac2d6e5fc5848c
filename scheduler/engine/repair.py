"""Repair: send again whatever a crash or an empty Redis may have lost.

Why: docs/decisions.md, "Lost attempts, timeouts, suspension, lateness" ("Repair on
engine start") and "Redis may restart empty".

PostgreSQL is the record; Redis only carries messages, and may restart empty. After
that, and whenever an engine starts, :func:`resend_lost` signals every transition
whose message may be gone, through the activation queue, so the engine applies each
like any other message (row lock, pure ``advance``, journal, outbox). Running it twice
changes nothing more: every signal names what it expects (a state, an attempt), and
the engine ignores it when that no longer holds.

- The outbox: every row not yet deleted goes out now (a relay deletes a row only when
  it has published it).
- READY attempts nobody has claimed: their dispatch may never have reached a worker.
  They are dispatched again under the same attempt number; a copy still on its way is
  skipped by the worker's claim, so at most one runs. Not an attempt of a lane
  (``common.domain.flow.lanes``) admitted in the current epoch: its lane's message is
  still in Redis, and sent again alone (it leaves the lane and waits) it could run
  beside the lane's others once that message is taken. An attempt running on a live
  worker is claimed again by that worker within a refresh of the new epoch
  (``common.messaging.holdings``); :class:`Repair` waits ``REASSERT_GRACE`` into an
  epoch before it looks, so only what nobody holds is sent again.
- Signals the beat sent and marked sent (a run's start, a retry after its backoff, a
  task's timeout backstop, the end of a cancel grace period): sent again while their
  transition has not happened.
- Runs stopping (cancel, pause) with no task left running: ``reconcile`` settles them.
- The cancel flags of attempts told to stop.

Expired leases are the beat's (``scheduler.beat.attempts``), which judges no worker
dead while the epoch is young.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from sqlalchemy import and_, exists, select
from sqlalchemy.orm import Session, sessionmaker

from common.domain.states import RunState, TaskState
from common.messaging.claims import ClaimHolders
from common.messaging.epoch import current_epoch
from common.messaging.keys import attempt_key
from common.messaging.liveness import LIVENESS_REFRESH
from common.messaging.messages import Signal
from common.messaging.signals import activation
from common.outage import Outage
from common.persistence.db import driver
from common.persistence.models import FlowSlot, Run, TaskRun
from common.persistence.outbox import OutboxRelay, enqueue
from common.persistence.queries import REPAIR_FLOW_SLOTS, REPAIR_FLOW_WAITERS, UNRECORDED_HELD
from common.unreachable import outage_wait

log = logging.getLogger(__name__)
BATCH = 1000
STOPPING = (RunState.CANCEL_REQUESTED.value, RunState.PAUSE_REQUESTED.value)
# How far into a new epoch a worker has surely asserted its claims again: two of its
# refreshes and a margin for a busy machine.
REASSERT_GRACE = 2 * LIVENESS_REFRESH + timedelta(seconds=1)
CHECK_EVERY = timedelta(seconds=1)


def resend_lost(
    sessions: sessionmaker[Session], relay: OutboxRelay, client: redis.Redis,
    stop_attempts: Callable[[Sequence[str]], None], clock: Callable[[], datetime],
) -> int:
    """Send every signal whose message may be lost; return how many were sent."""
    relay.relay_pending()
    claims = ClaimHolders(client)
    epoch_began = datetime.fromtimestamp(current_epoch(client).began_s, UTC)
    now = clock()
    with sessions.begin() as session:
        ids = settle_stopping_runs(session) + redeliver_unclaimed(session, claims,
                                                                  epoch_began)
        ids += repair_flow(session)
        ids += resend_marked_signals(session, now)
        stopping = attempts_to_stop(session)
    sent = relay.relay_due(ids, now)
    stop_attempts(stopping)
    log.info("repair: %d signals sent, %d attempts told to stop again", len(ids), len(stopping))
    return sent


def repair_flow(session: Session) -> list[int]:
    """Free leaked flow slots and waits; send held attempts with no wait through again."""
    conn = driver(session)
    conn.execute(REPAIR_FLOW_SLOTS)
    conn.execute(REPAIR_FLOW_WAITERS)
    rows = conn.execute(UNRECORDED_HELD).fetchall()
    return enqueue(session, [activation(run_id, "redeliver", name, attempt)
                             for run_id, name, attempt in rows])


def settle_stopping_runs(session: Session) -> list[int]:
    """``reconcile`` for runs stopping (cancel, pause) with no task left running."""
    active = exists().where(TaskRun.run_id == Run.id, TaskRun.state == TaskState.ACTIVE.value)
    ids = session.scalars(select(Run.id).where(Run.state.in_(STOPPING), ~active))
    return enqueue(session, [activation(run_id, "reconcile") for run_id in ids])


def redeliver_unclaimed(
    session: Session, claims: ClaimHolders, epoch_began: datetime | None = None,
) -> list[int]:
    """``redeliver`` for READY attempts whose claim nobody holds.

    Not those flow control holds: no message of theirs was sent (``repair_flow``). Nor,
    with ``epoch_began``, those admitted in a lane since Redis's data began: their
    message was sent to this Redis and is there until a worker takes it.
    """
    query = select(TaskRun.id, TaskRun.run_id, TaskRun.name, TaskRun.attempt).where(
        TaskRun.state == TaskState.READY.value, TaskRun.waiting_for.is_(None),
    ).order_by(TaskRun.id)
    if epoch_began is not None:
        query = query.where(~exists().where(
            FlowSlot.task_run_id == TaskRun.id, FlowSlot.lane.is_not(None),
            FlowSlot.at >= epoch_began))
    rows = session.execute(query).all()
    messages = []
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        holders = claims.holders([attempt_key(row.id, row.attempt) for row in chunk])
        messages += [
            activation(row.run_id, "redeliver", row.name, row.attempt)
            for row, holder in zip(chunk, holders, strict=True) if holder is None
        ]
    return enqueue(session, messages)


def resend_marked_signals(session: Session, now: datetime) -> list[int]:
    """The beat's signals marked sent whose transition has not happened yet.

    Each duty clears (or stamps) a column when it writes its signal; a state that
    still waits for the signal with the mark set means the message may be lost. A run's
    start marked sent ahead of its time (the beat's lookahead) waited in Redis's timed
    set: it is sent again timed, never early.
    """
    starts = session.execute(select(Run.id, Run.scheduled_for).where(
        Run.state == RunState.READY.value, Run.activation_sent_at.is_not(None),
    )).all()
    ids = enqueue(session, [activation(row.id, "start") for row in starts],
                  due_at=[row.scheduled_for if row.scheduled_for > now else None
                          for row in starts])
    runs = _signals(session, "cancel_grace_over", select(Run.id).where(
        Run.state == RunState.CANCEL_REQUESTED.value, Run.cancel_grace_sent_at.is_not(None),
    ))
    attempts: list[tuple[Signal, Any]] = [
        ("retry_due", and_(TaskRun.state == TaskState.SOFT_FAILED.value,
                           TaskRun.retry_at.is_(None))),
        ("task_timeout", and_(TaskRun.state == TaskState.ACTIVE.value,
                              TaskRun.deadline_at.is_(None))),
    ]
    messages = [
        activation(row.run_id, signal, row.name, row.attempt)
        for signal, where in attempts
        for row in session.execute(
            select(TaskRun.run_id, TaskRun.name, TaskRun.attempt).where(where))
    ]
    return ids + enqueue(session, runs + messages)


def _signals(session: Session, signal: Signal, query: Any) -> list[Any]:
    return [activation(run_id, signal) for run_id in session.scalars(query)]


def attempts_to_stop(session: Session) -> list[str]:
    """Idempotency keys of the ACTIVE attempts of runs being canceled (flags to set)."""
    rows = session.execute(select(TaskRun.id, TaskRun.attempt).join(
        Run, Run.id == TaskRun.run_id).where(
        Run.state == RunState.CANCEL_REQUESTED.value, TaskRun.state == TaskState.ACTIVE.value,
    ))
    return [attempt_key(row.id, row.attempt) for row in rows]


class Repair:
    """The engine's repair loop: once at start, then after each new Redis epoch.

    It waits ``REASSERT_GRACE`` into an epoch first, so that live workers have asserted
    their claims again. One engine or several: each repairs, which only costs the
    duplicate signals that the engine ignores.
    """

    def __init__(self, repair: Callable[[], int], client: redis.Redis) -> None:
        """``repair`` sends the signals (:func:`resend_lost` with its parts bound)."""
        self._repair = repair
        self._client = client
        self._done: str | None = None  # the epoch last repaired
        self.stopping = threading.Event()
        self.outages = [Outage("Redis", log), Outage("PostgreSQL", log)]

    def run(self) -> None:
        """Repair when due until :attr:`stopping` is set."""
        while not self.stopping.is_set():
            self.stopping.wait(self.step())

    def step(self) -> float:
        """Repair if a new epoch is old enough; return how long to wait before the next step."""
        redis_down, database_down = self.outages
        every_s = CHECK_EVERY.total_seconds()
        try:
            epoch = current_epoch(self._client)
            redis_down.succeeded()
            if epoch.name == self._done:
                return every_s
            grace_left_s = (REASSERT_GRACE - epoch.age()).total_seconds()
            if grace_left_s > 0:
                return min(every_s, grace_left_s)
            self._repair()
        except Exception as error:
            outage_s = outage_wait(error, redis_down, database_down)
            if outage_s is not None:
                return outage_s
            log.exception("repair failed; trying again")
            return every_s
        database_down.succeeded()
        self._done = epoch.name
        return every_s
