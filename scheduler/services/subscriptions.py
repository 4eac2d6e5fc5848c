"""Creating and deleting subscriptions, each announced by an event.

The rules: docs/decisions.md, "Notify: subscriptions, webhooks, Celery-task targets".

Plain functions on the caller's session, so that the REST API and the ``stellwerk.jobs``
queue consumer share them; the caller commits, then relays the returned outbox ids.
``subscription.created`` and ``subscription.deleted`` go through the outbox in the
same transaction as the change. ``event_extra`` adds fields to those events (the
queue consumer's ``request_id``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from common.domain.subscriptions import SubscriptionSpec, WebhookTarget
from common.messaging.messages import Event, utcnow
from common.persistence.models import Job, Subscription
from common.persistence.notify_events import record_events
from common.secure_params import NoSecretKey, SecretBox
from scheduler.services.access import Principal, tenant_of_new_subscription
from scheduler.services.errors import InvalidInput, NotFound

_WEBHOOK = ("body", "target", "webhook")


def create_subscription(
    session: Session, principal: Principal, body: SubscriptionSpec, *, secrets: SecretBox,
    now: datetime | None = None, event_extra: Mapping[str, Any] | None = None,
) -> Subscription:
    """Insert the subscription, secrets sealed; announce it.

    A bound token subscribes within its tenant (another is 403); a ``job_id`` it cannot
    see is 422 on ``selector.job_id``, as is an unknown one. A webhook secret cannot be
    stored without ``STELLWERK_SECRET_KEY`` (422 naming it).
    """
    now = now or utcnow()
    selector = body.selector
    tenant = tenant_of_new_subscription(principal, selector.tenant)
    job = _selected_job(session, selector.job_id, principal.tenant)
    subscription = Subscription(
        id=uuid4(), events=list(dict.fromkeys(body.events)), job_id=selector.job_id,
        job_type=selector.job_type, application=selector.application, tenant=tenant,
        target=body.target.kind, header_names=[], created_by=principal.name, created_at=now,
    )
    if body.target.webhook is not None:
        _set_webhook(subscription, body.target.webhook, secrets)
    else:
        subscription.celery_task, subscription.queue = body.target.celery_task, body.target.queue
    session.add(subscription)
    session.flush()
    event = _event("subscription.created", subscription, job, now, event_extra)
    record_events(session, [event])
    return subscription


def delete_subscription(
    session: Session, principal: Principal, subscription_id: UUID, *,
    now: datetime | None = None, event_extra: Mapping[str, Any] | None = None,
) -> None:
    """Delete one subscription (with its delivery log); announce it.

    One of another tenant is :class:`NotFound`, as if it did not exist.
    """
    query = delete(Subscription).where(Subscription.id == subscription_id)
    if principal.tenant is not None:
        query = query.where(Subscription.tenant == principal.tenant)
    deleted = session.scalars(query.returning(Subscription)).all()
    if not deleted:
        raise NotFound("subscription", subscription_id)
    _announce_deleted(session, deleted, now or utcnow(), event_extra)


def delete_job_subscriptions(
    session: Session, job_id: UUID, *, now: datetime | None = None,
    event_extra: Mapping[str, Any] | None = None,
) -> None:
    """Delete the subscriptions that select the job, in the caller's transaction."""
    deleted = session.scalars(
        delete(Subscription).where(Subscription.job_id == job_id).returning(Subscription)
    ).all()
    _announce_deleted(session, deleted, now or utcnow(), event_extra)


def _announce_deleted(
    session: Session, deleted: Sequence[Subscription], now: datetime,
    event_extra: Mapping[str, Any] | None,
) -> None:
    if not deleted:
        return
    jobs = _jobs(session, {s.job_id for s in deleted if s.job_id is not None})
    events = [
        _event("subscription.deleted", s, jobs.get(s.job_id) if s.job_id else None, now,
               event_extra)
        for s in deleted
    ]
    record_events(session, events)


def _selected_job(session: Session, job_id: UUID | None, tenant: str | None) -> Job | None:
    """The job the selector names (None for none); 422 if the caller cannot see it."""
    if job_id is None:
        return None
    job = session.get(Job, job_id)
    if job is None or (tenant is not None and job.tenant != tenant):
        raise InvalidInput(("body", "selector", "job_id"), f"job {job_id} not found")
    return job


def _jobs(session: Session, job_ids: set[UUID]) -> dict[UUID, Job]:
    if not job_ids:
        return {}
    return {job.id: job for job in session.scalars(select(Job).where(Job.id.in_(job_ids)))}


def _set_webhook(subscription: Subscription, webhook: WebhookTarget, secrets: SecretBox) -> None:
    """URL in clear; the secret and the header values sealed (422 without a key)."""
    try:
        subscription.sealed_secret = secrets.seal({"secret": webhook.secret.get_secret_value()})
    except NoSecretKey as error:
        raise InvalidInput((*_WEBHOOK, "secret"), f"cannot be stored: {error}") from error
    subscription.url = str(webhook.url)
    subscription.header_names = sorted(webhook.headers)
    subscription.sealed_headers = secrets.seal(webhook.headers) if webhook.headers else None


def _event(
    name: str, subscription: Subscription, job: Job | None, now: datetime,
    extra: Mapping[str, Any] | None,
) -> Event:
    """A subscription event, naming the subscription's job as the job's own events do.

    So the subscriptions that select that job select it too; without a job, it carries
    the fields the selector names.
    """
    if job is not None:
        facts = {"job_id": job.id, "job_name": job.name, "job_type": job.type,
                 "application": job.application, "tenant": job.tenant}
    else:
        facts = {"job_type": subscription.job_type or "", "tenant": subscription.tenant or "",
                 "application": subscription.application or ""}
    return Event(**{"event": name, "at": now, "subscription_id": subscription.id, **facts,
                    **(extra or {})})
