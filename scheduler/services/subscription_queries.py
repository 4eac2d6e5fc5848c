"""Reading subscriptions and their delivery logs, a page at a time, within a tenant.

A tenant-bound caller sees only its tenant's subscriptions; another tenant's is
:class:`NotFound`, with the message of one that does not exist.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from common.persistence.models import Delivery, DeliveryAttempt, Subscription
from scheduler.services.errors import InvalidInput, NotFound
from scheduler.services.pages import Page, decode_cursor, encode_cursor


@dataclass(frozen=True)
class DeliveryView:
    """A delivery with its tries, oldest first."""

    delivery: Delivery
    attempts: list[DeliveryAttempt]


def get_subscription(session: Session, subscription_id: UUID, tenant: str | None) -> Subscription:
    """The subscription, if the caller of ``tenant`` (None: every tenant) may see it."""
    query = select(Subscription).where(Subscription.id == subscription_id)
    if tenant is not None:
        query = query.where(Subscription.tenant == tenant)
    found = session.scalars(query).one_or_none()
    if found is None:
        raise NotFound("subscription", subscription_id)
    return found


def list_subscriptions(
    session: Session, tenant: str | None, limit: int, cursor: str | None = None,
    job_id: UUID | None = None,
) -> Page[Subscription]:
    """Newest first; only ``tenant``'s for a bound caller; optionally one job's."""
    query = select(Subscription)
    if tenant is not None:
        query = query.where(Subscription.tenant == tenant)
    if job_id is not None:
        query = query.where(Subscription.job_id == job_id)
    if cursor is not None:
        at, key = _key(decode_cursor(cursor, 2))
        query = query.where(tuple_(Subscription.created_at, Subscription.id) < tuple_(at, key))
    rows = list(session.scalars(
        query.order_by(Subscription.created_at.desc(), Subscription.id.desc()).limit(limit + 1)
    ))
    items = rows[:limit]
    last = items[-1] if len(rows) > limit else None
    return Page(items, _cursor(last.created_at, last.id) if last else None)


def list_deliveries(
    session: Session, subscription_id: UUID, tenant: str | None, limit: int, *,
    cursor: str | None = None, state: str | None = None,
) -> Page[DeliveryView]:
    """The subscription's deliveries, newest first, each with its tries."""
    get_subscription(session, subscription_id, tenant)
    query = select(Delivery).where(Delivery.subscription_id == subscription_id)
    if state is not None:
        query = query.where(Delivery.state == state)
    if cursor is not None:
        query = query.where(Delivery.seq < _seq(decode_cursor(cursor, 1)))
    rows = list(session.scalars(query.order_by(Delivery.seq.desc()).limit(limit + 1)))
    items = rows[:limit]
    tries: defaultdict[UUID, list[DeliveryAttempt]] = defaultdict(list)
    if items:
        for attempt in session.scalars(
            select(DeliveryAttempt).where(DeliveryAttempt.delivery_id.in_([d.id for d in items]))
            .order_by(DeliveryAttempt.delivery_id, DeliveryAttempt.number)
        ):
            tries[attempt.delivery_id].append(attempt)
    last = items[-1] if len(rows) > limit else None
    return Page([DeliveryView(d, tries[d.id]) for d in items],
                encode_cursor([last.seq]) if last else None)


def _cursor(created_at: datetime, ident: UUID) -> str:
    return encode_cursor([created_at.isoformat(), str(ident)])


def _seq(key: list[Any]) -> int:
    if not isinstance(key[0], int):
        raise InvalidInput(("query", "cursor"), "not a cursor returned by this API")
    return key[0]


def _key(key: list[Any]) -> tuple[datetime, UUID]:
    try:
        return datetime.fromisoformat(key[0]), UUID(key[1])
    except (TypeError, ValueError) as error:
        raise InvalidInput(("query", "cursor"), "not a cursor returned by this API") from error
