"""Answering a queued request: its outcome event, on the notify stream and ``reply_to``.

The services record the success events themselves (``job.created``... with the
request's ``request_id``), in the transaction of the change; the consumer finds the
answer among the events this transaction recorded and adds a copy for the producer's
``reply_to`` queue, as a ``stellwerk.event`` task message, to the same transaction.
A refused request is answered by ``request.failed`` with the REST API's message.
"""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session

from common.messaging.messages import EVENT_TASK, Event
from common.messaging.publisher import Outgoing
from common.persistence.notify_events import record_events, recorded_here
from common.persistence.outbox import enqueue
from scheduler.producers.validation import Refused, Sender
from scheduler.services.errors import InvalidInput, ServiceError
from scheduler.services.faults import describe_faults

log = logging.getLogger("stellwerk.producers")
INTERNAL_ERROR = "internal error; the notify process's log has the details"


def answer_event(session: Session, name: str, request_id: str) -> Event | None:
    """The event named ``name`` for ``request_id`` that this transaction recorded."""
    found = recorded_here(session, {"event": name, "request_id": request_id})
    return found[0] if found else None


def reply(session: Session, sender: Sender, event: Event) -> list[int]:
    """Write the copy of ``event`` for the sender's ``reply_to`` queue, if it named one."""
    if sender.reply_to is None:
        return []
    message = Outgoing(sender.reply_to, EVENT_TASK, event.model_dump(mode="json"), str(event.id))
    return enqueue(session, [message])


def refuse(
    session: Session, sender: Sender, reason: str, now: datetime, *,
    job_id: UUID | None = None, subscription_id: UUID | None = None,
) -> list[int]:
    """Announce ``request.failed`` (notify stream and ``reply_to``); return the outbox ids."""
    event = Event(
        event="request.failed", at=now, job_id=job_id, subscription_id=subscription_id,
        tenant=sender.tenant or "", reason=reason, request_id=sender.request_id,
    )
    record_events(session, [event])
    return reply(session, sender, event)


def reason_of(error: Exception, body: object = None) -> str:
    """What the REST API would have said about ``error`` (the ``detail`` of its answer)."""
    if isinstance(error, Refused):
        return str(error)
    if isinstance(error, InvalidInput):
        return describe_faults([{"loc": error.loc, "msg": error.msg}], body)
    if isinstance(error, ServiceError):
        return str(error)
    if isinstance(error, DataError):
        first = str(error.orig).splitlines()[0] if error.orig else "invalid value"
        return f"a value cannot be stored: {first}"
    log.error("unexpected error applying a queued request", exc_info=error)
    return INTERNAL_ERROR
