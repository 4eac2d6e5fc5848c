"""The beat's periodic duties, each a claim of due rows plus outbox messages.

Each duty claims due rows with ``FOR UPDATE SKIP LOCKED`` and marks them in the same
transaction that writes the activation messages to the outbox, so several beats (HA)
never fire the same thing twice and a crash never loses a fire. Every query walks a
partial index on the due time: the cost is O(due), not O(rows).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from common.messaging.messages import Signal
from common.messaging.signals import activation
from common.persistence.models import ConsumedMessage, Job, Run, TaskRun
from common.persistence.outbox import enqueue
from common.persistence.queries import CAPPED_DUE_RUNS

BATCH = 1000




def start_due_runs(session: Session, now: datetime, horizon: datetime | None = None) -> list[int]:
    """Activate READY runs due by ``horizon`` (default: now), each at its own time.

    The activation of a run due after ``now`` is a timed outbox row, due at the run's
    ``scheduled_for``: the engine takes it no earlier (``ticker``). A job with
    ``max_active_runs`` gets as many started as it has room for, oldest first.
    """
    horizon = horizon or now
    due = select(Run.id, Run.scheduled_for).join(Job, Job.id == Run.job_id).where(
        Run.state == "READY", Run.activation_sent_at.is_(None), Run.scheduled_for <= horizon,
        Job.max_active_runs.is_(None),
    ).limit(BATCH).with_for_update(of=Run, skip_locked=True)
    rows = [*session.execute(due).all(),
            *session.execute(CAPPED_DUE_RUNS, {"horizon": horizon}).all()]
    if not rows:
        return []
    session.execute(
        update(Run).where(Run.id.in_([r.id for r in rows])).values(activation_sent_at=now))
    return enqueue(session, [activation(r.id, "start") for r in rows],
                   due_at=[_later(r.scheduled_for, now) for r in rows])


def _later(when: datetime, now: datetime) -> datetime | None:
    return when if when > now else None


def fire_due_retries(session: Session, now: datetime, horizon: datetime | None = None) -> list[int]:
    """Send the retry of every SOFT_FAILED attempt whose backoff ends by ``horizon``.

    Like a run's start, a retry due after ``now`` is a timed message, taken at its time.
    """
    return _signal_due_attempts(session, TaskRun.retry_at, now, "retry_due",
                                horizon=horizon or now)


def time_out_attempts(session: Session, now: datetime) -> list[int]:
    """The backstop of attempts ACTIVE past their timeout whose worker did not report it."""
    return _signal_due_attempts(session, TaskRun.deadline_at, now, "task_timeout")


def _signal_due_attempts(
    session: Session, due_at: InstrumentedAttribute[datetime | None], now: datetime,
    signal: Signal, horizon: datetime | None = None,
) -> list[int]:
    """Clear ``due_at`` on the attempts it has passed and tell the engine about each.

    Clearing and the outbox rows commit together, so an attempt is signalled once;
    the engine ignores a signal for an attempt that is no longer current. With a
    ``horizon``, attempts due up to then are taken, their messages timed.
    """
    due = (
        select(TaskRun.id, due_at.label("due")).where(due_at <= (horizon or now))
        .limit(BATCH).with_for_update(skip_locked=True).cte("due")
    )
    rows = session.execute(
        update(TaskRun).where(TaskRun.id == due.c.id).values({due_at: None})
        .returning(TaskRun.run_id, TaskRun.name, TaskRun.attempt, due.c.due)
    ).all()
    messages = [activation(r.run_id, signal, r.name, r.attempt) for r in rows]
    timed = [_later(r.due, now) for r in rows] if horizon else None
    return enqueue(session, messages, due_at=timed)


def prune_consumed(session: Session, now: datetime, keep: timedelta) -> None:
    """Forget message ids old enough that no redelivery can still come."""
    session.execute(delete(ConsumedMessage).where(ConsumedMessage.at < now - keep))
