"""Checking a queued request as the REST API checks the same request, message for message.

A body is refused for exactly what ``POST /jobs`` or ``POST /subscriptions`` refuses it
for (size, characters PostgreSQL cannot store, the schema with its graph rules, the
params limits), and the reason is the ``detail`` line the API would answer with, so a
producer reads ``tasks[1].type (task 'b'): ...`` whichever way it submitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from pydantic import ValidationError

from common.domain.spec import JobSpec
from common.domain.subscriptions import SubscriptionSpec
from common.messaging.requests import KINDS, JobsRequest
from scheduler.services.faults import describe_faults
from scheduler.services.limits import Limits, params_faults
from scheduler.services.unstorable import unstorable_faults


class Refused(Exception):
    """A request that is not applied; the message is the answer's ``reason``."""


@dataclass(frozen=True)
class Sender:
    """Who gets the answer: what a request says about itself, even when it is invalid."""

    message_id: UUID | None
    request_id: str | None
    reply_to: str | None
    tenant: str | None = None

    @classmethod
    def of(cls, request: JobsRequest) -> Sender:
        """From a valid request."""
        return cls(request.message_id, request.request_id, request.reply_to, request.tenant)

    @classmethod
    def guess(cls, payload: Any) -> Sender:
        """From a request that failed validation: each field only if it is valid itself.

        An invalid ``reply_to`` is not used: it may name a queue Stellwerk consumes.
        """
        fields = payload if isinstance(payload, Mapping) else {}
        request_id = fields.get("request_id")
        valid_id = isinstance(request_id, str) and 0 < len(request_id) <= 200
        return cls(
            _uuid(fields.get("message_id")), request_id if valid_id else None,
            _reply_to(fields.get("reply_to")),
        )


def request_faults(error: ValidationError) -> str:
    """The reason for an invalid request: each fault of its own fields (``body`` whole)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in _without_tag(e['loc'])) or 'kind'}: "
        f"{e['msg'].removeprefix('Value error, ')}"
        for e in error.errors()
    )


def job_body(body: dict[str, Any], limits: Limits) -> JobSpec:
    """The body as ``POST /jobs`` would accept it, or :class:`Refused` with its reason.

    ``POST /jobs`` takes a ``JobSpec`` (named ``JobCreate`` in its OpenAPI document,
    which adds nothing to it), as ``POST /subscriptions`` takes a ``SubscriptionSpec``.
    """
    _check_size_and_text(body, limits.max_body_bytes)
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as error:
        raise Refused(_body_faults(error, body)) from error
    if faults := params_faults(spec, limits.max_params_bytes):
        raise Refused(describe_faults(faults, body))
    return spec


def subscription_body(body: dict[str, Any], limits: Limits) -> SubscriptionSpec:
    """The body as ``POST /subscriptions`` would accept it, or :class:`Refused`."""
    _check_size_and_text(body, limits.max_body_bytes)
    try:
        return SubscriptionSpec.model_validate(body)
    except ValidationError as error:
        raise Refused(_body_faults(error, body)) from error


def _check_size_and_text(body: dict[str, Any], max_bytes: int) -> None:
    size = len(json.dumps(body, separators=(",", ":")).encode())
    if size > max_bytes:
        raise Refused(f"the body exceeds the limit of {max_bytes} bytes (it is {size} as JSON)")
    if faults := unstorable_faults(body):
        raise Refused(describe_faults(faults, body))


def _body_faults(error: ValidationError, body: dict[str, Any]) -> str:
    faults = [{"loc": ("body", *e["loc"]), "msg": e["msg"]} for e in error.errors()]
    return describe_faults(faults, body)


def _without_tag(loc: Sequence[Any]) -> tuple[Any, ...]:
    """A location without the union's tag (``create_job.request_id`` → ``request_id``)."""
    return tuple(loc[1:]) if loc and loc[0] in KINDS else tuple(loc)


def _reply_to(value: Any) -> str | None:
    """``value`` if it is a valid ``reply_to`` on its own, else None."""
    try:
        return JobsRequest(message_id=uuid4(), request_id="-", reply_to=value).reply_to
    except ValidationError:
        return None


def _uuid(value: Any) -> UUID | None:
    try:
        return UUID(str(value)) if value is not None else None
    except ValueError:
        return None
