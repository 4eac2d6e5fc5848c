"""Subscriptions: which events a subscriber wants, and where they go.

The rules: docs/decisions.md, "Notify: subscriptions, webhooks, Celery-task targets".

Pure: the API validates a new subscription with :class:`SubscriptionSpec`, and the
notify runner decides with :func:`selects` which subscriptions an event reaches. Event
patterns are shell-style (``fnmatch``): ``run.*``, ``task.failed``, ``*``; matching is
case-sensitive, since event names are lower case by definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    field_validator,
    model_validator,
)

from common.domain.header_schema import headers_schema
from common.domain.webservice import URL_PATTERN

EventPattern = Annotated[str, StringConstraints(
    min_length=1, max_length=200, pattern=r"^[a-z0-9_.*?\[\]!-]+$",
)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# RFC 9110 field names ("token"); values without line breaks, which would split a header.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# Set by the runner itself: a subscription must not be able to forge or break them.
RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding",
                              "connection",
                              # Standard Webhooks' (scheduler.notify.signing, issue 14)
                              "webhook-id", "webhook-timestamp", "webhook-signature"})
RESERVED_PREFIX = "x-stellwerk-"
MAX_HEADERS = 50

# The header rules of ``WebhookTarget``, as the published schema states them (issue 14).
_HEADERS_SCHEMA = headers_schema(
    reserved=RESERVED_HEADERS, reserved_prefixes=[RESERVED_PREFIX], max_headers=MAX_HEADERS,
    max_name_chars=100, max_value_chars=8000,
)
# Exactly one kind of target, and ``queue`` only with a Celery task (``Target``).
_ONE_TARGET: dict[str, Any] = {"oneOf": [
    {"required": ["webhook"], "properties": {"webhook": {"type": "object"}},
     "not": {"anyOf": [{"required": ["celery_task"]}, {"required": ["queue"]}]}},
    {"required": ["celery_task"], "properties": {"celery_task": {"type": "string"}},
     "not": {"required": ["webhook"]}},
]}
TargetKind = Literal["webhook", "celery_task"]


class Selector(BaseModel):
    """Which jobs' events: every given field must match (none given: every job)."""

    model_config = ConfigDict(extra="forbid")

    job_id: UUID | None = None
    job_type: Name | None = None
    application: Name | None = None
    tenant: Name | None = None


class WebhookTarget(BaseModel):
    """A URL that gets each event as a signed JSON POST.

    ``secret`` and the header values are write-only: stored sealed, never returned.
    """

    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(description="http or https URL the events are POSTed to.",
                            json_schema_extra={"maxLength": 2000, "pattern": URL_PATTERN})
    secret: SecretStr = Field(
        min_length=1, max_length=1000,
        description="Key of the HMAC-SHA256 in X-Stellwerk-Signature. Write-only.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra request headers. Values are write-only.",
        json_schema_extra=_HEADERS_SCHEMA,
    )

    @field_validator("url")
    @classmethod
    def _bounded(cls, value: AnyHttpUrl) -> AnyHttpUrl:
        if len(str(value)) > 2000:
            raise ValueError("at most 2000 characters")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_HEADERS:
            raise ValueError(f"at most {MAX_HEADERS} headers")
        for name, text in value.items():
            lower = name.lower()
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if lower in RESERVED_HEADERS or lower.startswith(RESERVED_PREFIX):
                raise ValueError(f"{name!r} is set by Stellwerk and cannot be overridden")
            if "\r" in text or "\n" in text or len(text) > 8000:
                raise ValueError(f"the value of {name!r} must be one line of at most 8000 "
                                 "characters")
        return value


class Target(BaseModel):
    """Exactly one of: ``{"webhook": {...}}`` or ``{"celery_task": name, "queue": ...}``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_ONE_TARGET)

    webhook: WebhookTarget | None = None
    celery_task: Name | None = Field(
        default=None, description="A Celery task called with the event as its single argument.",
    )
    queue: Name = Field(default="celery", description="The Celery task's queue.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Target:
        if (self.webhook is None) == (self.celery_task is None):
            raise ValueError("give exactly one of 'webhook' and 'celery_task'")
        if self.webhook is not None and "queue" in self.model_fields_set:
            raise ValueError("'queue' belongs to a 'celery_task' target")
        return self

    @property
    def kind(self) -> TargetKind:
        """``webhook`` or ``celery_task``."""
        return "webhook" if self.webhook is not None else "celery_task"


class SubscriptionSpec(BaseModel):
    """A new subscription, as ``POST /subscriptions`` and ``stellwerk.jobs`` accept it."""

    model_config = ConfigDict(extra="forbid")

    events: list[EventPattern] = Field(
        min_length=1, max_length=50,
        description="Event name patterns, shell-style: `run.*`, `task.failed`, `*`.",
    )
    selector: Selector = Field(default_factory=Selector)
    target: Target


@dataclass(frozen=True)
class Rule:
    """What a stored subscription selects: event patterns, and selector fields (None: any)."""

    events: tuple[str, ...]
    job_id: UUID | None = None
    job_type: str | None = None
    application: str | None = None
    tenant: str | None = None


@dataclass(frozen=True)
class EventFacts:
    """What a subscription is matched against: the event's name and its job's ids."""

    event: str
    job_id: UUID | None = None
    job_type: str = ""
    application: str = ""
    tenant: str = ""


def event_matches(patterns: tuple[str, ...], event: str) -> bool:
    """Whether any pattern matches the event name."""
    return any(fnmatchcase(event, pattern) for pattern in patterns)


def selects(rule: Rule, facts: EventFacts) -> bool:
    """Whether the subscription wants the event: its patterns and every selector field."""
    wanted = (
        (rule.job_id, facts.job_id), (rule.job_type, facts.job_type),
        (rule.application, facts.application), (rule.tenant, facts.tenant),
    )
    return all(want is None or want == have for want, have in wanted) and event_matches(
        rule.events, facts.event
    )
