"""Request and response bodies: ``JobCreate`` in, ``JobPublic``, ``RunPublic``... out.

Durations are written as seconds (floats), as ``JobSpec`` writes them. Secure params
are accepted by ``JobCreate`` and appear in no response.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from common.domain.cron import CronError, CronSchedule
from common.domain.patch import JobPatch
from common.domain.spec import JobSpec, Schedule, TaskDefaults
from common.persistence.models import Job, JournalEntry, TaskLog
from scheduler.services.job_queries import JobDetail, JobSummary
from scheduler.services.processors import ProcessorView, worker_types
from scheduler.services.run_queries import RunDetail, RunSummary
from scheduler.services.serving import unserved_warnings, waiting_for


class JobCreate(JobSpec):
    """A job definition, as ``POST /jobs`` accepts it (docs/job-spec.md)."""


class JobUpdate(JobPatch):
    """A partial job definition, as ``PATCH /jobs/{id}`` accepts it; fields replace whole."""


class Public(BaseModel):
    """Base of response bodies."""

    model_config = ConfigDict(ser_json_timedelta="float", populate_by_name=True)


class TaskPublic(Public):
    """A task of a job's graph, with its server-side id and effective settings."""

    id: UUID
    name: str
    type: str
    params: dict[str, Any]
    next: list[str]
    timeout: timedelta
    retries: int
    retry_backoff: timedelta
    confirm: bool
    priority: int


class LatestRunPublic(Public):
    """A job's latest run, as the jobs list shows it."""

    id: UUID
    number: int
    state: str
    started_at: datetime | None
    finished_at: datetime | None


class JobSummaryPublic(Public):
    """A job as ``GET /jobs`` lists it: without its graph, params and storage."""

    id: UUID
    name: str
    description: str
    application: str
    type: str
    tenant: str
    owner: str
    labels: dict[str, str]
    priority: int
    schedule: Schedule
    enabled: bool
    draft: bool
    version: int
    state: str = Field(description="The latest run's state; NEW for a draft; for a cron job "
                       "between runs SCHEDULED, or DISABLED.")
    run_id: UUID | None = Field(description="The first run (the only one of a one-off job).")
    latest_run_id: UUID | None
    latest_run: LatestRunPublic | None = Field(
        default=None, description="The latest run: its number, state and times.")
    next_fire_at: datetime | None = Field(
        default=None, description="A cron job's next fire (none when disabled or a draft).")
    created_at: datetime
    updated_at: datetime


class WebServicePublic(Public):
    """A job's ``webservice`` settings; ``headers`` lists the names of its headers only."""

    url: str | None = None
    headers: list[str] = Field(default_factory=list)


class JobPublic(JobSummaryPublic):
    """A job with its graph, settings and storage; never its secure params."""

    params: dict[str, Any]
    storage: dict[str, Any]
    tasks: list[TaskPublic]
    canary: bool = False
    failure_threshold: float = 0.0
    timeout: timedelta | None = None
    task_defaults: TaskDefaults = Field(default_factory=TaskDefaults)
    catchup: str = "none"
    catchup_window: timedelta | None = None
    overlap: str = "allow"
    suspend_at: datetime | None = None
    suspend_after: timedelta | None = None
    auto_resume: bool = False
    late_after: timedelta | None = None
    next_fire_times: list[datetime] = Field(
        default_factory=list,
        description="A cron job's next five fire times (UTC); empty if it will not fire.",
    )
    webservice: WebServicePublic | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="Task types of this job no live worker serves: accepted, but their "
        "tasks wait READY until a worker serving them starts or their outcome is posted.",
    )

    @classmethod
    def of_detail(cls, detail: JobDetail, served: frozenset[str] | None = None) -> JobPublic:
        """From a service detail; settings come from the stored spec, identity from columns.

        ``served``: the types live workers serve, for ``warnings`` (none when not known).
        """
        tasks = [
            TaskPublic(
                id=v.task.id, name=v.task.name, type=v.task.type, params=v.task.params,
                next=v.next, timeout=timedelta(seconds=v.task.timeout_s),
                retries=v.task.retries, retry_backoff=timedelta(seconds=v.task.retry_backoff_s),
                confirm=v.task.confirm, priority=v.task.priority,
            )
            for v in detail.tasks
        ]
        fields = {**detail.summary.job.spec, **_summary_fields(detail.summary)}
        fields.update(params=detail.summary.job.params, storage=detail.storage, tasks=tasks)
        fields["next_fire_times"] = next_fire_times(detail.summary.job)
        fields["warnings"] = unserved_warnings(
            ((v.task.type, v.task.binding) for v in detail.tasks), served
        )
        return cls.model_validate(fields)


class JobsPublic(Public):
    """One page of jobs; pass ``next_cursor`` as ``cursor`` for the next (None: last page)."""

    data: list[JobSummaryPublic]
    next_cursor: str | None


class TaskRunPublic(Public):
    """One task in one run."""

    model_config = ConfigDict(from_attributes=True)

    id: UUID
    name: str
    type: str
    state: str
    attempt: int
    worker: str | None
    output: dict[str, Any] | None
    message: str
    started_at: datetime | None
    finished_at: datetime | None
    waiting_for: str | None = Field(
        default=None, description="Why a READY task has not started, when known "
        "(e.g. \"concurrency db-eu 2/2\", \"rate github 100/60s\", "
        "\"no worker serves type 'render'\").",
    )


class RunSummaryPublic(Public):
    """A run without its task list."""

    id: UUID
    job_id: UUID
    number: int
    trigger: str
    state: str
    scheduled_for: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: dict[str, int] = Field(description="Task counts per state.")


class RunPublic(RunSummaryPublic):
    """A run with its tasks, in the job's task order."""

    tasks: list[TaskRunPublic]

    @classmethod
    def of_detail(cls, detail: RunDetail, served: frozenset[str] | None = None) -> RunPublic:
        """From a service detail; READY tasks say so if no live worker of ``served`` serves them."""
        tasks = []
        for task_run in detail.tasks:
            public = TaskRunPublic.model_validate(task_run)
            # Flow control says why it holds a task (issue 16); else, perhaps, no worker.
            held = task_run.waiting_for if task_run.state == "READY" else None
            public.waiting_for = held or waiting_for(
                task_run.state, task_run.type, detail.bindings.get(task_run.id), served
            )
            tasks.append(public)
        return cls.model_validate({**_run_fields(detail.summary), "tasks": tasks})


class RunsPublic(Public):
    """One page of a job's runs, newest first."""

    data: list[RunSummaryPublic]
    next_cursor: str | None


class JournalEntryPublic(Public):
    """One recorded state change; ``task`` is None for a change of the run itself."""

    id: int
    at: datetime
    task: str | None
    attempt: int | None
    from_: str = Field(alias="from")
    to: str
    reason: str
    actor: str

    @classmethod
    def of(cls, entry: JournalEntry) -> JournalEntryPublic:
        """From a journal row."""
        return cls(
            id=entry.id, at=entry.at, task=entry.task, attempt=entry.attempt,
            from_=entry.from_state, to=entry.to_state, reason=entry.reason, actor=entry.actor,
        )


class JournalPublic(Public):
    """A page of a run's journal, oldest first; ``next_cursor`` as for lists."""

    entries: list[JournalEntryPublic]
    next_cursor: str | None


class LogLinePublic(Public):
    """One captured line of a task's output."""

    model_config = ConfigDict(from_attributes=True)

    at: datetime
    attempt: int
    stream: str
    line: str


class LogsPublic(Public):
    """A task's log lines, oldest first."""

    lines: list[LogLinePublic]

    @classmethod
    def of(cls, rows: list[TaskLog]) -> LogsPublic:
        """From log rows."""
        return cls(lines=[LogLinePublic.model_validate(r) for r in rows])


class WorkerPublic(Public):
    """A live worker, as its liveness record describes it."""

    hostname: str
    types: list[str]
    concurrency: int | None = None
    pid: int | None = None
    started_at: datetime | None = None
    seen_at: datetime | None = None


class ProcessorPublic(Public):
    """A task type: the live workers serving it and how many tasks are READY for it."""

    type: str
    served: bool
    ready: int
    workers: list[WorkerPublic]

    @classmethod
    def of(cls, view: ProcessorView) -> ProcessorPublic:
        """From a service view; a worker record that does not parse is left out."""
        workers = [w for w in map(_worker, view.workers) if w is not None]
        return cls(type=view.type, served=view.served, ready=view.ready, workers=workers)


class ProcessorsPublic(Public):
    """Every task type served now or needed by a READY task."""

    data: list[ProcessorPublic]


class ProblemError(Public):
    """One validation fault: where (as pydantic locates it) and what."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(Public):
    """An error, as ``application/problem+json`` (RFC 9457)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[ProblemError] | None = Field(default=None, description="Only on 422.")


class HealthPublic(Public):
    """Whether the API reaches its database and Redis; what is crash-looping under ``up``."""

    status: Literal["ok", "error"]
    database: str
    redis: str
    crash_looping: dict[str, int] = {}  # component → restarts within the last minute


def next_fire_times(job: Job, count: int = 5) -> list[datetime]:
    """The fires the beat handles next, from ``jobs.next_fire_at`` (NULL: none).

    Starting from the stored next fire, not from the clock, shows what the beat will
    do: a beat that is down shows as fire times in the past.
    """
    cron = job.schedule.get("cron")
    if not cron or job.next_fire_at is None:
        return []
    try:
        schedule = CronSchedule.parse(cron, job.schedule.get("timezone") or "UTC")
    except CronError:
        return []
    first = job.next_fire_at.astimezone(UTC)
    return [first, *schedule.fires_after(first, count - 1)]


class FireTimesPublic(Public):
    """A preview of a job's fire times after ``after``, in UTC."""

    job_id: UUID
    cron: str | None
    timezone: str
    after: datetime
    fire_times: list[datetime]


def _summary_fields(summary: JobSummary) -> dict[str, Any]:
    job = summary.job
    return {
        "id": job.id, "name": job.name, "description": job.description,
        "application": job.application, "type": job.type, "tenant": job.tenant,
        "owner": job.owner, "labels": job.labels, "priority": job.priority,
        "schedule": job.schedule, "enabled": job.enabled, "draft": job.draft,
        "version": job.version, "state": summary.state, "run_id": summary.run_id,
        "latest_run_id": summary.latest_run_id, "created_at": job.created_at,
        "updated_at": job.updated_at, "next_fire_at": job.next_fire_at,
        "latest_run": None if summary.latest is None else {
            "id": summary.latest.id, "number": summary.latest.number,
            "state": summary.latest.state, "started_at": summary.latest.started_at,
            "finished_at": summary.latest.finished_at},
    }


def _run_fields(summary: RunSummary) -> dict[str, Any]:
    run = summary.run
    return {
        "id": run.id, "job_id": run.job_id, "number": run.number, "trigger": run.trigger,
        "state": run.state, "scheduled_for": run.scheduled_for, "created_at": run.created_at,
        "started_at": run.started_at, "finished_at": run.finished_at,
        "progress": summary.progress,
    }


def worker_view(record: Any) -> WorkerPublic | None:
    """A liveness record as a worker, None for one that does not parse."""
    return _worker(record)


def _worker(record: Any) -> WorkerPublic | None:
    try:
        return WorkerPublic.model_validate({**record, "types": worker_types(record)})
    except (ValidationError, TypeError):
        return None


class ChangePublic(Public):
    """One difference between a job and the spec applied to it (secrets sealed)."""

    path: str = Field(description="A field (`schedule`) or a task's (`tasks.fetch.params`).")
    before: Any = Field(default=None, description="Absent for what is added.")
    after: Any = Field(default=None, description="Absent for what is removed.")


class JobApplied(Public):
    """What ``PUT /jobs/{name}`` did, or would do in a dry run."""

    action: Literal["created", "updated", "unchanged"]
    dry_run: bool
    changes: list[ChangePublic]
    job: JobPublic | None = Field(default=None, description="The job now (none in a dry "
                                  "run that would create it).")
    run_id: UUID | None = Field(default=None, description="A one-off job's new run.")


class ListedRunPublic(RunSummaryPublic):
    """A run as ``GET /runs`` lists it: with its job's name and tenant."""

    job_name: str
    tenant: str


class ListedRunsPublic(Public):
    """One page of runs across jobs, newest first; ``next_cursor`` as for jobs."""

    data: list[ListedRunPublic]
    next_cursor: str | None


class HistoryRunPublic(Public):
    """One run of a job's history: its state and times, and each task's state."""

    id: UUID
    number: int
    trigger: str
    state: str
    started_at: datetime | None
    finished_at: datetime | None
    tasks: dict[str, str] = Field(description="Each task's state, by name.")


class HistoryPublic(Public):
    """A job's last runs as a grid: its tasks in order, and the runs, newest first."""

    tasks: list[str]
    runs: list[HistoryRunPublic]


class RunningPublic(Public):
    """An attempt a worker runs now."""

    run_id: UUID
    job_name: str
    task: str
    attempt: int
    started_at: datetime | None


class LiveWorkerPublic(WorkerPublic):
    """A live worker and the attempts it runs."""

    running: list[RunningPublic] = Field(default_factory=list)


class WorkersPublic(Public):
    """Every live worker, by host name."""

    data: list[LiveWorkerPublic]
