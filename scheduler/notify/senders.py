"""Sending one delivery: a signed webhook POST, or a Celery task message.

A sender never raises for the receiver's sake: every failure (refused connection,
timeout, non-2xx answer, a secret it cannot open, Redis down) is a failed try with its
reason, which the delivery loop records and retries. A target the egress policy
refuses is a failed try marked ``permanent``: trying again cannot change the answer,
so the delivery is dead at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import httpx
import redis

from common.egress import EgressRefused
from common.messaging.publisher import Outgoing, Publisher
from common.secure_params import SecretBox, SecretKeyError
from common.tracing import headers_with_trace, span, tracing_on
from scheduler.notify.deliveries import Claimed
from scheduler.notify.signing import webhook_body, webhook_headers


@dataclass(frozen=True)
class Sent:
    """The result of one try."""

    ok: bool
    status_code: int | None = None
    error: str = ""
    # No later try can succeed (the egress policy refused the target): dead at once.
    permanent: bool = False


class Sender(Protocol):
    """Sends one claimed delivery."""

    def send(self, delivery: Claimed) -> Sent:
        """Try once; never raise for a failure of the receiver."""


class WebhookSender:
    """POSTs the event with the signature headers of :mod:`.signing`; 2xx is delivered."""

    def __init__(
        self, http: httpx.Client, secrets: SecretBox, clock: Callable[[], datetime]
    ) -> None:
        """``http`` carries the timeout and is shared by the delivery threads."""
        self._http = http
        self._secrets = secrets
        self._clock = clock

    def send(self, delivery: Claimed) -> Sent:
        """One POST; the response body is not read (only its status counts)."""
        try:
            secret = str(self._secrets.open(delivery.sealed_secret or "")["secret"])
            extra = self._secrets.open(delivery.sealed_headers) if delivery.sealed_headers else {}
        except (SecretKeyError, KeyError) as error:
            return Sent(False, error=f"cannot open the webhook secret: {error}")
        body = webhook_body(delivery.payload)
        headers = webhook_headers(
            event=delivery.event, event_id=str(delivery.event_id),
            delivery_id=str(delivery.id), timestamp=int(self._clock().timestamp()),
            secret=secret, body=body, extra={k: str(v) for k, v in extra.items()},
        )
        try:
            # With tracing on: a span in the event's run's trace, handed to the receiver.
            with span("stellwerk.notify.deliver", delivery.payload.get("traceparent"),
                      _attributes(delivery) if tracing_on() else None) as traced, \
                    self._http.stream("POST", delivery.url or "", content=body,
                                      headers=headers_with_trace(headers, traced)) as response:
                status = response.status_code
        except EgressRefused as error:
            return Sent(False, error=str(error), permanent=True)
        except httpx.HTTPError as error:
            return Sent(False, error=_reason(error))
        return Sent(200 <= status < 300, status, "" if 200 <= status < 300 else "not 2xx")


class CeleryTaskSender:
    """Publishes a Celery message of the task, with the event as its single argument.

    The delivery id is the Celery task id, so a consumer can tell a repeated try.
    """

    def __init__(self, publisher: Publisher) -> None:
        """Publish with ``publisher``."""
        self._publisher = publisher

    def send(self, delivery: Claimed) -> Sent:
        """One publish; a Redis error is a failed try."""
        message = Outgoing(delivery.queue or "celery", delivery.celery_task or "",
                           delivery.payload, str(delivery.id))
        try:
            self._publisher.publish([message])
        except redis.RedisError as error:
            return Sent(False, error=_reason(error))
        return Sent(True)


def _attributes(delivery: Claimed) -> dict[str, str | int]:
    return {"stellwerk.event": delivery.event, "stellwerk.delivery": str(delivery.id),
            "stellwerk.subscription": str(delivery.subscription_id),
            "stellwerk.attempt": delivery.attempt}


def _reason(error: Exception) -> str:
    """The class and message of an error, one line."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
