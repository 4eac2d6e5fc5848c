"""The tables: PostgreSQL is the only record of state (docs/architecture.md, "The tables").

Typed SQLAlchemy 2 models with a naming convention, so that Alembic's migrations and
these models can be compared by a test.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Json = dict[str, Any]
TZ = DateTime(timezone=True)


class Base(DeclarativeBase):
    """Declarative base with the naming convention."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {Json: JSONB, datetime: TZ, uuid.UUID: UUID(as_uuid=True)}


class Job(Base):
    """A job definition; ``spec`` keeps the settings as submitted (no secrets)."""

    __tablename__ = "jobs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    application: Mapped[str] = mapped_column(String(200), default="", index=True)
    type: Mapped[str] = mapped_column(String(200), default="", index=True)
    tenant: Mapped[str] = mapped_column(String(200), default="", index=True)
    owner: Mapped[str] = mapped_column(String(200), default="")
    labels: Mapped[Json] = mapped_column(default=dict)
    priority: Mapped[int] = mapped_column(Integer, default=5)
    params: Mapped[Json] = mapped_column(default=dict)
    secure_params: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The header values of the job's ``webservice`` settings, sealed like secure params
    # (``spec`` keeps their names only).
    sealed_webservice_headers: Mapped[str | None] = mapped_column(Text, nullable=True)
    spec: Mapped[Json] = mapped_column(default=dict)
    schedule: Mapped[Json] = mapped_column(default=dict)
    draft: Mapped[bool] = mapped_column(Boolean, default=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    next_fire_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # At most this many unfinished runs; the beat starts the others as they end (issue 16).
    max_active_runs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())

    __table_args__ = (
        Index(
            "ix_jobs_next_fire_at", "next_fire_at",
            postgresql_where=text("next_fire_at IS NOT NULL"),
        ),
        # A name names one job of its tenant (issue 17: jobs addressed by name).
        Index("uq_jobs_tenant_name", "tenant", "name", unique=True),
        # ``GET /jobs``: newest first, paged on this key.
        Index("ix_jobs_created", "created_at", "id"),
    )


class JobStorage(Base):
    """Free JSON a job keeps between runs (``[saveJobStorage]``, storage callbacks)."""

    __tablename__ = "job_storage"

    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[Json] = mapped_column(default=dict)
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())
    # The job's last successful run (a shell task's LAST_SUCCESS_START/FINISH,
    # docs/job-spec.md), kept here and not on the job row: the engine writes it as runs
    # complete, and the beat holds job rows locked while it fires them.
    last_success_start: Mapped[datetime | None] = mapped_column(nullable=True)
    last_success_finish: Mapped[datetime | None] = mapped_column(nullable=True)


class Task(Base):
    """One task of a job's graph."""

    __tablename__ = "tasks"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(100))
    params: Mapped[Json] = mapped_column(default=dict)
    secure_params: Mapped[str | None] = mapped_column(Text, nullable=True)
    timeout_s: Mapped[float] = mapped_column(Float)
    retries: Mapped[int] = mapped_column(Integer, default=0)
    retry_backoff_s: Mapped[float] = mapped_column(Float, default=1.0)
    confirm: Mapped[bool] = mapped_column(Boolean, default=False)
    priority: Mapped[int] = mapped_column(Integer, default=5)
    # Set when ``type`` is a registered worker type: how its attempts are dispatched
    # (engine, params with the url, sealed headers), worked out when the job is written
    # (``scheduler.services.task_binding``).
    binding: Mapped[Json | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # Flow control (issue 16): the task's concurrency keys with their limits and its
    # rate, rendered when the job is written (``common.domain.flow_spec.FlowNeeds``).
    flow: Mapped[Json | None] = mapped_column(JSONB(none_as_null=True), nullable=True)

    __table_args__ = (UniqueConstraint("job_id", "name"),)


class TaskEdge(Base):
    """``from_task`` names ``to_task`` in its ``next``."""

    __tablename__ = "task_edges"
    # The engine reads a job's edges by job; a task's deletion finds those pointing to
    # it by ``to_task`` (migration 0017).
    __table_args__ = (
        Index("ix_task_edges_job_id", "job_id"),
        Index("ix_task_edges_to_task", "to_task"),
    )

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    from_task: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )
    to_task: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )


def _due_indexes(table: str, *columns: str) -> list[Index]:
    """Partial indexes on due-time columns, so that the beat's claims cost O(due)."""
    return [
        Index(f"ix_{table}_{c}", c, postgresql_where=text(f"{c} IS NOT NULL")) for c in columns
    ]


class Run(Base):
    """One execution of a job."""

    __tablename__ = "runs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20))
    scheduled_for: Mapped[datetime]
    activation_sent_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Bumped by every engine transaction on the run: lets an engine reuse its cached
    # snapshot when no other engine has touched the run since.
    version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cancel_requested_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Run control timers (the beat's ``timers``): the grace signal is sent once per
    # cancel; ``timeout_at`` is the start plus the job's timeout, cleared when signalled.
    cancel_grace_sent_at: Mapped[datetime | None] = mapped_column(nullable=True)
    timeout_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Suspension and lateness (``scheduler.beat.suspension``, ``scheduler.beat.lateness``):
    # when to pause the run, when to resume it, when to announce it late if not started.
    suspend_due_at: Mapped[datetime | None] = mapped_column(nullable=True)
    resume_due_at: Mapped[datetime | None] = mapped_column(nullable=True)
    late_at: Mapped[datetime | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # The run's W3C trace context while tracing is on (``common.tracing``), else NULL.
    traceparent: Mapped[str | None] = mapped_column(String(60), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())

    __table_args__ = (
        UniqueConstraint("job_id", "number"),
        Index(
            "ix_runs_due", "scheduled_for",
            postgresql_where=text("state = 'READY' AND activation_sent_at IS NULL"),
        ),
        Index(
            "ix_runs_cancel_grace", "cancel_requested_at",
            postgresql_where=text(
                "state = 'CANCEL_REQUESTED' AND cancel_grace_sent_at IS NULL"
            ),
        ),
        Index("ix_runs_timeout_at", "timeout_at", postgresql_where=text("timeout_at IS NOT NULL")),
        *_due_indexes("runs", "suspend_due_at", "resume_due_at", "late_at"),
        # Retention (``common.persistence.retention``) takes the oldest finished runs.
        Index(
            "ix_runs_finished_at", "finished_at",
            postgresql_where=text("finished_at IS NOT NULL"),
        ),
        # A job's unfinished runs, counted against its ``max_active_runs``.
        Index("ix_runs_unfinished", "job_id", postgresql_where=text("finished_at IS NULL")),
        # ``GET /runs``: newest first, paged on this key.
        Index("ix_runs_created", "created_at", "id"),
    )


class TaskRun(Base):
    """One task in one run, with its current attempt."""

    __tablename__ = "task_runs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    base: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)
    output: Mapped[Json | None] = mapped_column(nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    lease_expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    retry_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Lost attempts (``scheduler.beat.attempts``): when to check who holds a READY
    # attempt's claim, and the timeout backstop of an ACTIVE one.
    claim_check_at: Mapped[datetime | None] = mapped_column(nullable=True)
    deadline_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # The current attempt is completed by someone else (a web service, a post-back): it
    # holds no lease, only ``deadline_at`` (its timeout, renewed by each detached report).
    detached: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    # A READY attempt flow control holds back: why (``concurrency key:db-eu 2/2``); None
    # once it is dispatched (issue 16).
    waiting_for: Mapped[str | None] = mapped_column(String(300), nullable=True)

    __table_args__ = (
        UniqueConstraint("run_id", "name"),
        # A task's deletion finds its task runs (the foreign key's cascade; migration 0018).
        Index("ix_task_runs_task_id", "task_id"),
        Index("ix_task_runs_retry_at", "retry_at", postgresql_where=text("retry_at IS NOT NULL")),
        Index(
            "ix_task_runs_lease", "lease_expires_at",
            postgresql_where=text("lease_expires_at IS NOT NULL"),
        ),
        *_due_indexes("task_runs", "claim_check_at", "deadline_at"),
    )


class JournalEntry(Base):
    """Every state change of a run or task: time, from, to, reason, actor."""

    __tablename__ = "journal"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task: Mapped[str | None] = mapped_column(String(200), nullable=True)
    attempt: Mapped[int | None] = mapped_column(Integer, nullable=True)
    at: Mapped[datetime]
    from_state: Mapped[str] = mapped_column(String(20))
    to_state: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(200), default="engine")

    # A run's entries in their order: pages of a run's journal, and its deletion.
    __table_args__ = (Index("ix_journal_run_order", "run_id", "id"),)


class OutboxMessage(Base):
    """A message written with the state change that caused it, relayed afterwards."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    queue: Mapped[str] = mapped_column(String(200))
    task_name: Mapped[str] = mapped_column(String(200))
    task_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    payload: Mapped[Json]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    # Not to be published before this (a run's start, a retry): the beat that wrote the
    # row publishes it on time; any relay sends it once it is overdue by the grace.
    due_at: Mapped[datetime | None] = mapped_column(nullable=True)


class NotifyEvents(Base):
    """Events for the notify runner, written in the transaction of the change they tell of.

    One row per writing transaction, its events in order. The runner turns rows into
    deliveries and deletes them in one transaction, taking them in ``id`` order (issue
    13: Redis, which carried them before, may lose everything it holds).
    """

    __tablename__ = "notify_events"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    events: Mapped[list[Json]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class ConsumedMessage(Base):
    """Ids of messages whose effects are committed: a redelivered message is skipped.

    Inserted in the same transaction as the effects, so "seen" and "applied" can never
    disagree; the beat prunes rows older than a day.
    """

    __tablename__ = "consumed_messages"

    message_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(server_default=func.now(), index=True)


class TaskLog(Base):
    """Captured output of a task attempt."""

    __tablename__ = "task_logs"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    task_run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("task_runs.id", ondelete="CASCADE"), index=True
    )
    attempt: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime]
    stream: Mapped[str] = mapped_column(String(10))
    line: Mapped[str] = mapped_column(Text)


class Fire(Base):
    """One nominal fire time of a cron job and what became of it.

    Why: docs/decisions.md, "Cron schedules" ("One row per fire").

    The unique (job, fire time) pair is what keeps several beats from firing anything
    twice. ``outcome`` is ``run`` (``run_id`` is set), ``skipped`` (``reason`` says
    why) or ``buffered`` (waiting for the job's previous run to finish). ``run_id`` has
    no foreign key: a fire and its run only ever go away together, with their job.
    """

    __tablename__ = "fires"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    fire_at: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(String(20))
    trigger: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    run_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    recorded_at: Mapped[datetime]

    __table_args__ = (
        UniqueConstraint("job_id", "fire_at"),
        Index("ix_fires_buffered", "job_id", postgresql_where=text("outcome = 'buffered'")),
        # Retention deletes the oldest fires that no longer wait (issue 14).
        Index("ix_fires_fire_at", "fire_at", postgresql_where=text("outcome <> 'buffered'")),
    )


class ApiToken(Base):
    """An API token: only the SHA-256 of its value is kept, looked up by it.

    Why: docs/decisions.md, "Tokens, scopes and tenants".

    ``tenant`` None means the token sees every tenant; ``expires_at`` None, never expires.
    A deleted token's row is gone, so it authenticates no more.
    """

    __tablename__ = "api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(String(20)))
    tenant: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime | None] = mapped_column(nullable=True)


class WorkerType(Base):
    """A task type served by a web service, registered by name.

    The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".

    Header values may be credentials: sealed (``common.secure_params``), only their
    names readable. Jobs copy what they need when they are written (``tasks.binding``).
    """

    __tablename__ = "worker_types"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    engine: Mapped[str] = mapped_column(String(20))
    url: Mapped[str] = mapped_column(Text)
    sealed_headers: Mapped[str | None] = mapped_column(Text, nullable=True)
    header_names: Mapped[list[str]] = mapped_column(ARRAY(String(200)))
    job_template: Mapped[Json] = mapped_column(default=dict)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]


class Subscription(Base):
    """Who wants which events: patterns, a selector, and one target.

    The rules: docs/decisions.md, "Notify: subscriptions, webhooks, Celery-task targets".

    A NULL selector column matches anything. ``tenant`` is also whose subscription it
    is: a tenant-bound token sees only its tenant's. A webhook's secret and header
    values are sealed (``common.secure_params``); only the names of the headers are
    kept readable, to be shown. ``job_id`` cascades as a backstop: deleting a job
    deletes its subscriptions itself first, to announce each.
    """

    __tablename__ = "subscriptions"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    events: Mapped[list[str]] = mapped_column(ARRAY(String(200)))
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), nullable=True, index=True
    )
    job_type: Mapped[str | None] = mapped_column(String(200), nullable=True)
    application: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tenant: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    target: Mapped[str] = mapped_column(String(20))  # webhook | celery_task
    url: Mapped[str | None] = mapped_column(Text, nullable=True)
    sealed_secret: Mapped[str | None] = mapped_column(Text, nullable=True)
    sealed_headers: Mapped[str | None] = mapped_column(Text, nullable=True)
    header_names: Mapped[list[str]] = mapped_column(ARRAY(String(100)))
    celery_task: Mapped[str | None] = mapped_column(String(200), nullable=True)
    queue: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]


class Delivery(Base):
    """One event on its way to one subscription: ``pending``, ``delivered`` or ``dead``.

    ``due_at`` is when a runner may next take it: the next try of a pending delivery,
    or, while a runner holds it (``claim``), the end of that runner's lease, after
    which another runner takes it again. Unique per (subscription, event): a notify
    message read twice cannot deliver an event twice. ``seq`` orders the deliveries
    as their events happened: those of one run to one subscription go out one at a
    time, in that order.
    """

    __tablename__ = "deliveries"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, Identity())
    subscription_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("subscriptions.id", ondelete="CASCADE")
    )
    run_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    event_id: Mapped[uuid.UUID]
    event: Mapped[str] = mapped_column(String(200))
    payload: Mapped[Json]
    state: Mapped[str] = mapped_column(String(20))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    due_at: Mapped[datetime | None] = mapped_column(nullable=True)
    claim: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)

    __table_args__ = (
        UniqueConstraint("subscription_id", "event_id"),
        Index("ix_deliveries_due", "due_at", postgresql_where=text("state = 'pending'")),
        Index(
            "ix_deliveries_queue", "subscription_id", "run_id", "seq",
            postgresql_where=text("state = 'pending'"),
        ),
        Index("ix_deliveries_listing", "subscription_id", "seq"),
    )


class DeliveryAttempt(Base):
    """One try of a delivery: when, how long, and the HTTP status or the error."""

    __tablename__ = "delivery_attempts"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    delivery_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("deliveries.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime]
    duration_ms: Mapped[float] = mapped_column(Float)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")


class FlowLimit(Base):
    """A limit an operator set on a key (``stellwerk limit set``), or a tenant's weight.

    Keys: ``type:NAME`` (active attempts of a task type), ``tenant:NAME`` (active
    attempts of a tenant; ``weight`` its share of turns), or any ``key:``/``rate:`` key
    a task names, whose limit this overrides (issue 16).
    """

    __tablename__ = "flow_limits"

    key: Mapped[str] = mapped_column(String(210), primary_key=True)
    limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    weight: Mapped[int | None] = mapped_column(Integer, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())


class FlowSlot(Base):
    """One attempt holding one key: a key's usage is the count of its lanes.

    Attempts admitted in a lane (to run one after another in one slot) name its lead
    in ``lane``; an attempt alone has none, and is its own lane. Deleted with the
    attempt's end, in the transaction that ends it; the task run's deletion (retention,
    a deleted job) takes it too, by a trigger rather than a foreign key (migration 0020:
    a key's lookup cost each admitted attempt more than the rest of its row).
    """

    __tablename__ = "flow_slots"

    key: Mapped[str] = mapped_column(String(210), primary_key=True)
    task_run_id: Mapped[uuid.UUID] = mapped_column(primary_key=True, index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    tenant: Mapped[str] = mapped_column(String(200))
    at: Mapped[datetime]
    lane: Mapped[uuid.UUID | None] = mapped_column(nullable=True)


class FlowWaiter(Base):
    """A READY attempt waiting for one of its keys, in the order it may start.

    The primary key is led by the attempt, so that ``ix_flow_waiters_order`` is the one
    index a read by key can take (migration 0014). The task run's deletion takes it by a
    trigger, as it takes ``FlowSlot`` (migration 0020).
    """

    __tablename__ = "flow_waiters"

    task_run_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(210), primary_key=True)
    run_id: Mapped[uuid.UUID] = mapped_column()
    task: Mapped[str] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer)
    tenant: Mapped[str] = mapped_column(String(200))
    priority: Mapped[int] = mapped_column(Integer)
    # The limit the task states for this key (a spec's ``concurrency`` or ``rate``).
    stated_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    stated_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    seq: Mapped[int] = mapped_column(BigInteger, Identity())
    since: Mapped[datetime]

    __table_args__ = (
        Index("ix_flow_waiters_order", "key", "tenant", text("priority DESC"), "seq"),
    )


class FlowStart(Base):
    """A start on a rated key: a rate's usage is the count of them in its window."""

    __tablename__ = "flow_starts"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    key: Mapped[str] = mapped_column(String(210))
    at: Mapped[datetime]

    __table_args__ = (Index("ix_flow_starts_key_at", "key", "at"),)
