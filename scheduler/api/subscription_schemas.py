"""Bodies of ``/subscriptions``: ``SubscriptionCreate`` in; subscriptions and deliveries out.

A webhook's secret and header values are never returned.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from common.domain.subscriptions import Selector, SubscriptionSpec
from common.persistence.models import DeliveryAttempt, Subscription
from scheduler.services.pages import Page
from scheduler.services.subscription_queries import DeliveryView


class SubscriptionCreate(SubscriptionSpec):
    """A new subscription: event patterns, a selector and one target."""


class WebhookPublic(BaseModel):
    """A webhook target as shown: its URL and the names of its extra headers."""

    url: str
    headers: list[str] = Field(description="Names only: the values are write-only.")


class TargetPublic(BaseModel):
    """The target: ``webhook``, or ``celery_task`` with its ``queue``."""

    webhook: WebhookPublic | None = None
    celery_task: str | None = None
    queue: str | None = None


class SubscriptionPublic(BaseModel):
    """A subscription as listed and read."""

    id: UUID
    events: list[str]
    selector: Selector
    target: TargetPublic
    created_by: str
    created_at: datetime

    @classmethod
    def of(cls, row: Subscription) -> SubscriptionPublic:
        """From a subscription row."""
        if row.target == "webhook":
            target = TargetPublic(webhook=WebhookPublic(url=row.url or "",
                                                        headers=list(row.header_names)))
        else:
            target = TargetPublic(celery_task=row.celery_task, queue=row.queue)
        selector = Selector(job_id=row.job_id, job_type=row.job_type,
                            application=row.application, tenant=row.tenant)
        return cls(id=row.id, events=list(row.events), selector=selector, target=target,
                   created_by=row.created_by, created_at=row.created_at)


class SubscriptionsPublic(BaseModel):
    """One page of subscriptions, newest first (``next_cursor`` None: the last page)."""

    data: list[SubscriptionPublic]
    next_cursor: str | None

    @classmethod
    def of(cls, page: Page[Subscription]) -> SubscriptionsPublic:
        """From a service page."""
        return cls(data=[SubscriptionPublic.of(s) for s in page.items],
                   next_cursor=page.next_cursor)


class AttemptPublic(BaseModel):
    """One try: when, how long, and the HTTP status or the error."""

    number: int
    at: datetime
    duration_ms: float
    status_code: int | None
    error: str

    @classmethod
    def of(cls, row: DeliveryAttempt) -> AttemptPublic:
        """From an attempt row."""
        return cls(number=row.number, at=row.at, duration_ms=row.duration_ms,
                   status_code=row.status_code, error=row.error)


class DeliveryPublic(BaseModel):
    """One event's delivery to the subscription, with every try."""

    id: UUID = Field(description="Sent as `X-Stellwerk-Delivery` (the Celery task id).")
    event_id: UUID
    event: str
    state: str = Field(description="`pending`, `delivered`, or `dead` (every try failed).")
    next_try_at: datetime | None = Field(description="When a pending delivery is tried next.")
    created_at: datetime
    finished_at: datetime | None
    payload: dict[str, Any] = Field(description="The event as it is sent.")
    attempts: list[AttemptPublic]

    @classmethod
    def of(cls, view: DeliveryView) -> DeliveryPublic:
        """From a service view."""
        row = view.delivery
        return cls(
            id=row.id, event_id=row.event_id, event=row.event, state=row.state,
            next_try_at=row.due_at if row.state == "pending" else None,
            created_at=row.created_at, finished_at=row.finished_at, payload=row.payload,
            attempts=[AttemptPublic.of(a) for a in view.attempts],
        )


class DeliveriesPublic(BaseModel):
    """One page of deliveries, newest first."""

    data: list[DeliveryPublic]
    next_cursor: str | None

    @classmethod
    def of(cls, page: Page[DeliveryView]) -> DeliveriesPublic:
        """From a service page."""
        return cls(data=[DeliveryPublic.of(v) for v in page.items], next_cursor=page.next_cursor)
