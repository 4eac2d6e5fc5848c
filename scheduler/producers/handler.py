"""Applying one ``stellwerk.jobs`` request in one transaction, exactly once.

The message id is claimed in ``consumed_messages`` first, in the caller's transaction;
the change and its answer follow in that same transaction, so a redelivered request
finds its id taken and changes nothing, and is not answered twice. The change itself
runs in a savepoint: a refused request rolls back to it and is answered by
``request.failed``, which commits with the claim.

Requests over the broker are trusted like the admin token (whoever can write to Redis
can write to Stellwerk's queues anyway); a request naming a ``tenant`` acts as a token
bound to that tenant would.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import ValidationError
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from common.egress import EgressPolicy
from common.messaging.requests import (
    CreateJob,
    CreateSubscription,
    DeleteJob,
    DeleteSubscription,
    parse_request,
)
from common.persistence.db import driver
from common.secure_params import SecretBox
from scheduler.engine.writer import claim_messages
from scheduler.producers.answers import answer_event, reason_of, refuse, reply
from scheduler.producers.validation import Sender, job_body, request_faults, subscription_body
from scheduler.services.access import Principal, tenant_of_new_job
from scheduler.services.egress_checks import check_job, check_subscription
from scheduler.services.job_lifecycle import delete_job
from scheduler.services.jobs import create_job
from scheduler.services.limits import Limits
from scheduler.services.subscriptions import create_subscription, delete_subscription
from scheduler.services.tenancy import visible_job

Request = CreateJob | DeleteJob | CreateSubscription | DeleteSubscription
ACTOR = "broker"  # the principal's name, and the journal's actor of a forced delete
ANSWERS = {
    "create_job": "job.created", "delete_job": "job.deleted",
    "create_subscription": "subscription.created", "delete_subscription": "subscription.deleted",
}


class RequestHandler:
    """Applies requests with the services the REST API uses, and answers them."""

    def __init__(
        self, *, limits: Limits, secrets: SecretBox, cancel_run: Callable[[UUID], None],
        egress: EgressPolicy,
    ) -> None:
        self._limits = limits
        self._secrets = secrets
        self._egress = egress  # literal targets are refused as the API refuses them
        self._cancel_run = cancel_run  # a forced delete cancels runs as the API does

    def handle(self, session: Session, payload: Any, now: datetime) -> list[int]:
        """Apply and answer one request in the caller's transaction; return outbox ids.

        A request seen before changes nothing and returns ``[]``. A lost database
        connection (or a deadlock) is raised, for the caller to retry the request.
        """
        try:
            request = parse_request(payload)
        except ValidationError as error:
            sender = Sender.guess(payload)
            if not _first_time(session, sender.message_id):
                return []
            return refuse(session, sender, request_faults(error), now)
        sender = Sender.of(request)
        if not _first_time(session, request.message_id):
            return []
        try:
            with session.begin_nested():
                outbox_ids = self._apply(session, request, now)
        except (OperationalError, InterfaceError):
            raise
        except Exception as error:
            reason = reason_of(error, getattr(request, "body", None))
            return refuse(session, sender, reason, now, job_id=getattr(request, "job_id", None),
                          subscription_id=getattr(request, "subscription_id", None))
        answer = answer_event(session, ANSWERS[request.kind], request.request_id)
        return outbox_ids + (reply(session, sender, answer) if answer else [])

    def _apply(self, session: Session, request: Request, now: datetime) -> list[int]:
        principal = Principal(name=ACTOR, scopes=frozenset({"job"}), tenant=request.tenant)
        request_id = request.request_id
        match request:
            case CreateJob():
                return self._create_job(session, principal, request, now)
            case DeleteJob():
                visible_job(session, request.job_id, principal.tenant)
                delete_job(
                    session, request.job_id, force=request.force, cancel_run=self._cancel_run,
                    now=now, request_id=request_id,
                )
            case CreateSubscription():
                body = subscription_body(request.body, self._limits)
                check_subscription(self._egress, body)
                create_subscription(
                    session, principal, body, secrets=self._secrets, now=now,
                    event_extra={"request_id": request_id},
                )
            case DeleteSubscription():
                delete_subscription(
                    session, principal, request.subscription_id, now=now,
                    event_extra={"request_id": request_id},
                )
        return []

    def _create_job(
        self, session: Session, principal: Principal, request: CreateJob, now: datetime
    ) -> list[int]:
        spec = job_body(request.body, self._limits)
        spec = spec.model_copy(update={"tenant": tenant_of_new_job(principal, spec.tenant)})
        check_job(session, self._egress, spec)
        created = create_job(session, spec, now, self._secrets, request_id=request.request_id)
        return created.outbox_ids


def _first_time(session: Session, message_id: UUID | None) -> bool:
    """Claim the message id; False if it was claimed before (a redelivery).

    A request without a valid id cannot be de-duplicated; it is refused, and only
    answered again if it is delivered again.
    """
    return message_id is None or bool(claim_messages(driver(session), [message_id]))
