"""Requests that producers send on ``stellwerk.jobs`` instead of calling the REST API.

Each is the single argument of a Celery task message (task name ``stellwerk.jobs``),
so a service with only Celery or kombu can create and delete jobs and subscriptions.
``kind`` says which request it is. ``request_id`` is the producer's own name for the
request and comes back on the answer event; ``message_id`` is the de-duplication key:
a request delivered twice is applied and answered once. The answer goes to the notify
stream and, when ``reply_to`` names a queue, also to that queue (docs/decisions.md,
"Producers on ``stellwerk.jobs``").

The bodies stay plain JSON objects here: they are validated by the same schemas as
``POST /jobs`` and ``POST /subscriptions``, so that a bad body can still be answered
with the request's ``request_id`` and the REST API's message.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, TypeAdapter, field_validator

from common.messaging.messages import TASK_QUEUE_PREFIX, Message

# Answers never go to a queue Stellwerk consumes itself: an event there would be a
# message its consumer does not expect (or, on ``tasks.<type>``, work for a worker).
_OWN_QUEUE_PREFIXES = ("stellwerk.", TASK_QUEUE_PREFIX)


class JobsRequest(Message):
    """What every request carries."""

    message_id: UUID  # required: without it a redelivered request could be applied twice
    request_id: str = Field(min_length=1, max_length=200)
    reply_to: str | None = Field(default=None, min_length=1, max_length=200)
    # Act as a token bound to this tenant would: a job is created in it, and only its
    # jobs and subscriptions are found. None: every tenant, as the admin token.
    tenant: str | None = Field(default=None, max_length=200)

    @field_validator("reply_to")
    @classmethod
    def _not_own_queue(cls, value: str | None) -> str | None:
        if value is not None and value.startswith(_OWN_QUEUE_PREFIXES):
            raise ValueError(
                f"may not name one of Stellwerk's own queues ({', '.join(_OWN_QUEUE_PREFIXES)}*)"
            )
        return value


class CreateJob(JobsRequest):
    """Create a job; ``body`` is exactly what ``POST /jobs`` takes."""

    kind: Literal["create_job"]
    body: dict[str, Any]


class DeleteJob(JobsRequest):
    """Delete a job, as ``DELETE /jobs/{job_id}?force=...``."""

    kind: Literal["delete_job"]
    job_id: UUID
    force: bool = False


class CreateSubscription(JobsRequest):
    """Create a subscription; ``body`` is exactly what ``POST /subscriptions`` takes."""

    kind: Literal["create_subscription"]
    body: dict[str, Any]


class DeleteSubscription(JobsRequest):
    """Delete a subscription, as ``DELETE /subscriptions/{subscription_id}``."""

    kind: Literal["delete_subscription"]
    subscription_id: UUID


AnyRequest = Annotated[
    CreateJob | DeleteJob | CreateSubscription | DeleteSubscription, Field(discriminator="kind")
]
KINDS = ("create_job", "delete_job", "create_subscription", "delete_subscription")


@functools.cache
def _adapter() -> TypeAdapter[AnyRequest]:
    return TypeAdapter(AnyRequest)


def parse_request(payload: Any) -> CreateJob | DeleteJob | CreateSubscription | DeleteSubscription:
    """The request in ``payload``; raises pydantic's ``ValidationError`` naming each fault."""
    return _adapter().validate_python(payload)
