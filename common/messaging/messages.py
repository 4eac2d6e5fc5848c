"""Versioned wire messages: pydantic models serialised as JSON, never pickle.

Every message has a unique ``message_id``; consumers are idempotent, so a message
delivered twice (a relay re-sending after a crash) changes nothing the second time.
On the wire each is the single argument of a Celery task message, so that any Celery
or kombu client can publish to Stellwerk's queues.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID, uuid4

from pydantic import BaseModel, ConfigDict, Field

from common.messaging.keys import attempt_key

ACTIVATION_QUEUE = "stellwerk.activation"
RESULTS_QUEUE = "stellwerk.results"
JOBS_QUEUE = "stellwerk.jobs"
TASK_QUEUE_PREFIX = "tasks."

ACTIVATE_TASK = "stellwerk.activate"
RESULT_TASK = "stellwerk.result"
EXECUTE_TASK = "stellwerk.execute"
EXECUTE_BUNDLE_TASK = "stellwerk.execute_bundle"
EVENT_TASK = "stellwerk.event"  # an answer event on a producer's ``reply_to`` queue


def task_queue(task_type: str) -> str:
    """The queue of one task type."""
    return f"{TASK_QUEUE_PREFIX}{task_type}"


def _is_none(value: object) -> bool:
    return value is None


def utcnow() -> datetime:
    """Now, timezone-aware."""
    return datetime.now(UTC)


class Message(BaseModel):
    """Common envelope fields."""

    model_config = ConfigDict(extra="ignore")

    v: int = 1
    message_id: UUID = Field(default_factory=uuid4)


Signal = Literal[
    "start", "retry_due", "lease_expired", "cancel_grace_over", "run_timeout", "cancel",
    "task_timeout", "suspend", "auto_resume", "redeliver", "reconcile",
]


class Activation(Message):
    """A timer fired for a run: its start, a retry's backoff, a lost lease, ..."""

    run_id: UUID
    signal: Signal = "start"
    task: str | None = None
    attempt: int | None = None


class TaskDispatch(Message):
    """One attempt of one task, sent to ``tasks.<type>``."""

    task_run_id: UUID
    run_id: UUID
    job_id: UUID
    job_name: str
    tenant: str = ""
    task: str
    type: str
    attempt: int
    params: dict[str, Any] = Field(default_factory=dict)
    secure_params: dict[str, Any] = Field(default_factory=dict)
    job_params: dict[str, Any] = Field(default_factory=dict)
    job_secure_params: dict[str, Any] = Field(default_factory=dict)
    # Stellwerk's engine sends secure params sealed (``common.secure_params``) so that
    # they are never plain text in the outbox or on Redis; the worker opens them. The
    # plain fields above are for other publishers, which hold no key.
    sealed_secure_params: str | None = None
    sealed_job_secure_params: str | None = None
    storage: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = 12 * 3600.0
    last_success_start: datetime | None = None
    last_success_finish: datetime | None = None
    # The run's trace context (W3C ``traceparent``) while tracing is on (common.tracing).
    traceparent: str | None = None

    @property
    def idempotency_key(self) -> str:
        """``<task run id>:<attempt>``, unique per attempt."""
        return attempt_key(self.task_run_id, self.attempt)


def dispatch_body(
    *, task_run_id: UUID, run_id: UUID, job_id: UUID, job_name: str, tenant: str, task: str,
    type: str, attempt: int, params: dict[str, Any], sealed_secure_params: str | None,
    job_params: dict[str, Any], sealed_job_secure_params: str | None,
    storage: dict[str, Any], timeout_s: float, last_success_start: datetime | None,
    last_success_finish: datetime | None, traceparent: str | None,
) -> dict[str, Any]:
    """What ``TaskDispatch(...).model_dump(mode="json")`` gives, built as it is.

    The engine builds one for every attempt it dispatches from values it read and
    holds; the model's validation and dump cost it 30 us each (the worker validates the
    message it receives). ``tests/unit/messaging/test_dispatch_body.py`` holds the two
    alike; the dicts (JSON already) are not copied.
    """
    return {
        "v": 1, "message_id": str(uuid4()), "task_run_id": str(task_run_id),
        "run_id": str(run_id), "job_id": str(job_id), "job_name": job_name,
        "tenant": tenant, "task": task, "type": type, "attempt": attempt, "params": params,
        "secure_params": {}, "job_params": job_params, "job_secure_params": {},
        "sealed_secure_params": sealed_secure_params,
        "sealed_job_secure_params": sealed_job_secure_params, "storage": storage,
        "timeout_s": float(timeout_s), "last_success_start": _instant(last_success_start),
        "last_success_finish": _instant(last_success_finish), "traceparent": traceparent,
    }


def _instant(at: datetime | None) -> str | None:
    """A datetime as pydantic writes it in JSON (``Z`` for UTC)."""
    if at is None:
        return None
    text = at.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class TaskBundle(Message):
    """Several dispatches of one queue in one broker message (see ``bundling``).

    The items stay plain dicts so that a malformed one is rejected on its own, exactly
    as it would be in a ``stellwerk.execute`` message, without losing its neighbours.
    """

    queue: str
    dispatches: list[dict[str, Any]] = Field(min_length=1)
    # A lane: its attempts share one flow slot, so they run in order, never handed back.
    lane: bool = False


def bundle_body(
    queue: str, dispatches: list[dict[str, Any]], *, lane: bool = False,
) -> dict[str, Any]:
    """What ``TaskBundle(...).model_dump(mode="json")`` gives, built as it is.

    The items are dispatch bodies the engine built (``dispatch_body``): JSON already.
    The model's dump walked every value of every item again (a lane of 32 cost the
    engine 17 us an attempt); the worker validates the bundle it receives.
    """
    if not dispatches:
        raise ValueError("a bundle holds at least one dispatch")
    return {"v": 1, "message_id": str(uuid4()), "queue": queue, "dispatches": dispatches,
            "lane": lane}


class LogLine(BaseModel):
    """One captured line of a task's output."""

    at: datetime
    stream: Literal["stdout", "stderr", "log"] = "stdout"
    line: str


ResultKind = Literal["started", "heartbeat", "finished"]
Outcome = Literal["COMPLETED", "FAILED", "REJECTED", "TIMEOUT"]


class TaskResult(Message):
    """What a worker or connector reports about an attempt."""

    task_run_id: UUID
    run_id: UUID
    attempt: int
    kind: ResultKind
    outcome: Outcome | None = None
    output: dict[str, Any] | None = None
    message: str = ""
    worker: str = ""
    at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    logs: list[LogLine] = Field(default_factory=list)
    storage: dict[str, Any] | None = None
    # Set on ``started``/``heartbeat`` of an attempt that someone else completes later
    # (a processor returned ``Accepted``; a web-service worker answered 201; a callback
    # arrived): its lease no longer follows the reporter's liveness but the task's
    # timeout, renewed by each such message; without one for that long it is TIMEOUT.
    detached: bool = False


class Event(BaseModel):
    """One state change as subscribers see it (names: docs/architecture.md, "Events").

    ``id`` names the event itself: webhook deliveries carry it (so a receiver can
    de-duplicate) and the live stream shows it. ``job_id`` is None for an event about no
    one job (a subscription that selects no job, a request that failed).
    """

    id: UUID = Field(default_factory=uuid4)
    event: str
    at: datetime
    job_id: UUID | None = None
    job_name: str = ""
    job_type: str = ""
    application: str = ""
    tenant: str = ""
    run_id: UUID | None = None
    task: str | None = None
    task_id: UUID | None = None
    attempt: int | None = None
    previous: str | None = None
    state: str | None = None
    reason: str = ""
    scheduled_for: datetime | None = None  # the nominal time of a cron fire
    subscription_id: UUID | None = None  # subscription.created / subscription.deleted
    # The producer's ``request_id`` on the answer to a ``stellwerk.jobs`` request
    # (``job.created``, ``request.failed``...); None when the change came another way.
    request_id: str | None = None
    # The run's W3C trace context while tracing is on (``common.tracing``); left out of
    # the JSON when None, so that without tracing no event says anything of it. (A wrap
    # serializer did this before and made every dump go through a Python dict: the
    # engine serializes five events a cron fire.)
    traceparent: str | None = Field(default=None, exclude_if=_is_none)


# An :class:`Event` as the fields of its JSON, for the engine, which writes several
# every state change (``scheduler.engine.changes``): the model's validation and dump
# cost it 14% of its CPU at 250 cron fires a second, for values it built itself.
EventFields = dict[str, Any]


def event_fields(
    event: str, at: datetime, *, job_id: UUID, job_name: str, job_type: str,
    application: str, tenant: str, run_id: UUID, previous: str, state: str, reason: str,
    task: str | None = None, task_id: UUID | None = None, attempt: int | None = None,
    traceparent: str | None = None,
) -> EventFields:
    """What ``Event(...).model_dump()`` gives for a run's or task's state change.

    In the model's field order, unvalidated (``tests/unit/messaging/test_event_fields.py``
    holds the two alike).
    """
    fields: EventFields = {
        "id": uuid4(), "event": event, "at": at, "job_id": job_id, "job_name": job_name,
        "job_type": job_type, "application": application, "tenant": tenant,
        "run_id": run_id, "task": task, "task_id": task_id, "attempt": attempt,
        "previous": previous, "state": state, "reason": reason, "scheduled_for": None,
        "subscription_id": None, "request_id": None,
    }
    if traceparent is not None:
        fields["traceparent"] = traceparent
    return fields

