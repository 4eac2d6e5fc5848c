"""``/subscriptions``: who gets which events, and the log of their deliveries.

The rules: docs/decisions.md, "Notify: subscriptions, webhooks, Celery-task targets".

Creating and deleting need ``job``, reading ``job.read``. A tenant-bound token creates
subscriptions of its tenant and sees only those; another tenant's is 404.
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from scheduler.api.deps import NowDep, PrincipalDep, ResourcesDep, SessionDep, require_json, scope
from scheduler.api.routes.jobs import Cursor
from scheduler.api.subscription_schemas import (
    DeliveriesPublic,
    SubscriptionCreate,
    SubscriptionPublic,
    SubscriptionsPublic,
)
from scheduler.services.egress_checks import check_subscription
from scheduler.services.subscription_queries import (
    get_subscription,
    list_deliveries,
    list_subscriptions,
)
from scheduler.services.subscriptions import create_subscription, delete_subscription

router = APIRouter(prefix="/subscriptions", tags=["subscriptions"])

Limit = Annotated[int, Query(ge=1, le=500, description="Page size.")]
DeliveryState = Literal["pending", "delivered", "dead"]


@router.post("", status_code=201, dependencies=[Depends(require_json), Depends(scope("job"))])
def create(
    body: SubscriptionCreate, session: SessionDep, resources: ResourcesDep, now: NowDep,
    principal: PrincipalDep,
) -> SubscriptionPublic:
    """Subscribe a webhook or a Celery task to the events the patterns and selector pick."""
    check_subscription(resources.egress, body)
    created = create_subscription(session, principal, body, secrets=resources.secrets, now=now)
    session.commit()
    return SubscriptionPublic.of(created)


@router.get("", dependencies=[Depends(scope("job.read"))])
def list_(
    session: SessionDep, principal: PrincipalDep, limit: Limit = 50, cursor: Cursor = None,
    job_id: Annotated[UUID | None, Query(description="Only those selecting this job.")] = None,
) -> SubscriptionsPublic:
    """Subscriptions, newest first, one page at a time."""
    return SubscriptionsPublic.of(
        list_subscriptions(session, principal.tenant, limit, cursor, job_id)
    )


@router.get("/{subscription_id}", dependencies=[Depends(scope("job.read"))])
def read(subscription_id: UUID, session: SessionDep, principal: PrincipalDep) -> SubscriptionPublic:
    """One subscription (without its secret or header values)."""
    return SubscriptionPublic.of(get_subscription(session, subscription_id, principal.tenant))


@router.delete(
    "/{subscription_id}", status_code=204, response_class=Response,
    dependencies=[Depends(scope("job"))],
)
def delete(
    subscription_id: UUID, session: SessionDep, now: NowDep,
    principal: PrincipalDep,
) -> Response:
    """Delete the subscription and its delivery log; pending deliveries are dropped."""
    delete_subscription(session, principal, subscription_id, now=now)
    session.commit()
    return Response(status_code=204)


@router.get("/{subscription_id}/deliveries", dependencies=[Depends(scope("job.read"))])
def deliveries(
    subscription_id: UUID, session: SessionDep, principal: PrincipalDep, limit: Limit = 50,
    cursor: Cursor = None, *, state: DeliveryState | None = None,
) -> DeliveriesPublic:
    """The delivery log: each event sent to the subscription, with every try, newest first."""
    return DeliveriesPublic.of(list_deliveries(
        session, subscription_id, principal.tenant, limit, cursor=cursor, state=state,
    ))
