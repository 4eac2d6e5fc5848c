"""What ``GET /metrics`` reports from PostgreSQL: runs and task runs counted by state.

Two grouped counts per scrape. They read every row of ``runs`` and ``task_runs`` (no
index on state), fast for the sizes Stellwerk keeps; a statement timeout bounds a
scrape of a huge database, which then reports the counts as unavailable, not slow.
Given a ``tenant`` (a tenant-bound token's), each count is of that tenant's jobs and
subscriptions only (issue 14).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select, func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from common.persistence.models import Delivery, Job, NotifyEvents, Run, Subscription, TaskRun

_STATEMENT_TIMEOUT_MS = 5000
_Query = TypeVar("_Query", bound=Select[*tuple[Any, ...]])


@dataclass(frozen=True)
class StateCounts:
    """Runs per state, and task runs per (type, state)."""

    runs: dict[str, int]
    tasks: dict[tuple[str, str], int]


def state_counts(session: Session, tenant: str | None = None) -> StateCounts | None:
    """The counts (of ``tenant``'s jobs), or None if the database did not answer in time."""
    runs_query = select(Run.state, func.count()).group_by(Run.state)
    tasks_query = select(TaskRun.type, TaskRun.state, func.count()).group_by(
        TaskRun.type, TaskRun.state)
    if tenant is not None:
        runs_query = _of_tenant(runs_query, tenant)
        tasks_query = _of_tenant(tasks_query.join(Run, Run.id == TaskRun.run_id), tenant)
    try:
        session.execute(text(f"SET LOCAL statement_timeout = {_STATEMENT_TIMEOUT_MS}"))
        runs = session.execute(runs_query).all()
        tasks = session.execute(tasks_query).all()
    except OperationalError:  # the statement timeout (QueryCanceled)
        session.rollback()
        return None
    return StateCounts(
        runs={state: int(n) for state, n in runs},
        tasks={(type_, state): int(n) for type_, state, n in tasks},
    )


def _of_tenant(query: _Query, tenant: str) -> _Query:
    """``query`` (which reads ``runs``) narrowed to the runs of ``tenant``'s jobs."""
    return query.join(Job, Job.id == Run.job_id).where(Job.tenant == tenant)


@dataclass(frozen=True)
class DeliveryCount:
    """Deliveries in one (target, state), and the tries made for them."""

    deliveries: int
    attempts: int


def delivery_counts(
    session: Session, tenant: str | None = None,
) -> dict[tuple[str, str], DeliveryCount] | None:
    """Notify deliveries by (target kind, state), or None on the statement timeout.

    Finished deliveries are kept for a week (``scheduler.notify.delivery_loop``), so
    these are the counts over that window.
    """
    query = (
        select(Subscription.target, Delivery.state, func.count(),
               func.coalesce(func.sum(Delivery.attempts), 0))
        .join(Subscription, Subscription.id == Delivery.subscription_id)
        .group_by(Subscription.target, Delivery.state)
    )
    if tenant is not None:
        query = query.where(Subscription.tenant == tenant)
    try:
        session.execute(text(f"SET LOCAL statement_timeout = {_STATEMENT_TIMEOUT_MS}"))
        rows = session.execute(query).all()
    except OperationalError:
        session.rollback()
        return None
    return {(target, state): DeliveryCount(int(n), int(tries)) for target, state, n, tries in rows}


def pending_notify_events(session: Session) -> int | None:
    """Rows of events the notify runner has not taken yet, or None on the statement timeout.

    What ``stellwerk.notify``'s depth used to show, now that the events wait in
    PostgreSQL (issue 13). The table holds only pending rows, so the count is cheap.
    """
    try:
        session.execute(text(f"SET LOCAL statement_timeout = {_STATEMENT_TIMEOUT_MS}"))
        return int(session.scalar(select(func.count()).select_from(NotifyEvents)) or 0)
    except OperationalError:
        session.rollback()
        return None
