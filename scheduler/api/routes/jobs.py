"""``/jobs``: create, list, read, change, commit and delete jobs; run now; list runs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from sqlalchemy.orm import Session

from common.domain.states import RunState
from scheduler.api.deps import (
    JobIdDep,
    NowDep,
    PrincipalDep,
    ResourcesDep,
    SessionDep,
    require_json,
    scope,
)
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.limits import LimitsDep, check_params_sizes
from scheduler.api.list_bodies import jobs_json, page_json
from scheduler.api.resources import Resources
from scheduler.api.schemas import (
    ChangePublic,
    HistoryPublic,
    HistoryRunPublic,
    JobApplied,
    JobCreate,
    JobPublic,
    JobsPublic,
    JobUpdate,
    Problem,
    RunPublic,
    RunsPublic,
)
from scheduler.services.access import listed_tenant, tenant_of_new_job
from scheduler.services.egress_checks import check_job
from scheduler.services.errors import InvalidInput, NotFound
from scheduler.services.job_apply import apply_job
from scheduler.services.job_lifecycle import commit_job, delete_job
from scheduler.services.job_queries import (
    JobFilter,
    JobStateName,
    list_jobs,
    read_job,
    read_job_async,
)
from scheduler.services.job_update import update_job
from scheduler.services.jobs import create_job
from scheduler.services.pages import CURSOR_PATTERN
from scheduler.services.run_lists import run_grid
from scheduler.services.run_queries import get_run, list_runs
from scheduler.services.runs import create_run
from scheduler.services.tenancy import visible_job

router = APIRouter(prefix="/jobs", tags=["jobs"])

Shown = TypeVar("Shown")

Limit = Annotated[int, Query(ge=1, le=500, description="Page size.")]
Cursor = Annotated[str | None, Query(
    description="`next_cursor` of the previous page.",
    json_schema_extra={"pattern": CURSOR_PATTERN},  # what one looks like (issue 14)
)]


async def job_filter(
    job_type: Annotated[str | None, Query(alias="type")] = None,
    application: str | None = None,
    tenant: str | None = None,
    label: Annotated[list[str] | None, Query(
        description="`key=value`, repeatable.",
        json_schema_extra={"items": {"type": "string", "pattern": "^[^=\\u0000]+=[^\\u0000]*$"}},
    )] = None,
    state: Annotated[list[JobStateName] | None, Query(description="Repeatable: any of.")] = None,
    *, principal: PrincipalDep,
    name: Annotated[str | None, Query(
        max_length=200, description="A part of the job's name, in any case.",
    )] = None,
) -> JobFilter:
    """The filters of ``GET /jobs``; every given one must match (and a bound token's tenant)."""
    labels: dict[str, str] = {}
    for item in label or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInput(("query", "label"), f"expected key=value, got {item!r}")
        labels[key] = value
    return JobFilter(
        job_type, application, listed_tenant(principal, tenant), labels, tuple(state or ()),
        name=name,
    )


@router.post("", status_code=201, response_model=JobPublic, responses={409: {
    "model": Problem, "content": {PROBLEM_JSON: {}},
    "description": "The tenant has a job of this name; `detail` names it. Nothing was changed.",
}}, dependencies=[Depends(require_json), Depends(scope("job"))])
async def create(
    spec: JobCreate, resources: ResourcesDep, now: NowDep, principal: PrincipalDep, *,
    limits: LimitsDep,
) -> Response:
    """Create a job; a one-off job gets its run at once (its id is ``run_id``)."""
    # One hop to a request thread for the session and the writes, the answer's JSON
    # written here: as a sync route with a session dependency it hopped twice (the route,
    # then FastAPI's check of what it returned), and its session's close was a third step.
    check_params_sizes(spec, limits.max_params_bytes)
    spec = spec.model_copy(update={"tenant": tenant_of_new_job(principal, spec.tenant)})
    job = await run_in_threadpool(lambda: _create(spec, resources, now))
    return Response(job.model_dump_json(by_alias=True), status_code=201,
                    media_type="application/json")


def _create(spec: JobCreate, resources: Resources, now: datetime) -> JobPublic:
    with resources.sessions() as session:
        check_job(session, resources.egress, spec)
        created = create_job(session, spec, now, resources.secrets)
        detail = _shown_and_committed(session, lambda: read_job(session, created.job_id))
    resources.relay_now(created.outbox_ids)
    return JobPublic.of_detail(detail, resources.served_types())


@router.get("", response_model=JobsPublic, dependencies=[Depends(scope("job.read"))])
async def list_(
    resources: ResourcesDep, filters: Annotated[JobFilter, Depends(job_filter)],
    limit: Limit = 50, cursor: Cursor = None,
) -> Response:
    """Jobs, newest first, one page at a time."""
    page = await resources.read(lambda conn: list_jobs(conn, filters, limit, cursor))
    return Response(jobs_json(page), media_type="application/json")


@router.get("/{job_id}", response_model=JobPublic, dependencies=[Depends(scope("job.read"))])
async def read(job_id: JobIdDep, principal: PrincipalDep, resources: ResourcesDep) -> Response:
    """One job with its tasks and storage."""
    detail = await resources.read(lambda conn: read_job_async(conn, job_id))
    if principal.tenant is not None and detail.summary.job.tenant != principal.tenant:
        raise NotFound("job", job_id)
    body = JobPublic.of_detail(detail, await resources.served_now())
    return Response(body.model_dump_json(by_alias=True), media_type="application/json")


@router.post("/{job_id}/runs", status_code=201, dependencies=[Depends(scope("job"))])
def run_now(
    job_id: JobIdDep, session: SessionDep, resources: ResourcesDep, now: NowDep,
    principal: PrincipalDep,
) -> RunPublic:
    """Start a new run of the job now."""
    visible_job(session, job_id, principal.tenant)
    created = create_run(session, job_id, "api", now, now)
    detail = _shown_and_committed(session, lambda: get_run(session, created.run_id))
    resources.relay_now(created.outbox_ids)
    return RunPublic.of_detail(detail, resources.served_types())


@router.get("/{job_id}/runs", response_model=RunsPublic,
            dependencies=[Depends(scope("job.read"))])
async def runs(
    job_id: JobIdDep, resources: ResourcesDep, principal: PrincipalDep, limit: Limit = 50,
    cursor: Cursor = None, *,
    state: Annotated[list[RunState] | None, Query(description="Repeatable: any of.")] = None,
) -> Response:
    """The job's runs, newest first, one page at a time."""
    page = await resources.read(lambda conn: list_runs(
        conn, job_id, principal.tenant, limit, cursor, states=tuple(state or ())))
    return Response(page_json(page), media_type="application/json")


_CONFLICT: dict[int | str, dict[str, Any]] = {409: {
    "model": Problem, "content": {PROBLEM_JSON: {}},
    "description": "The job's state does not allow it; `detail` names the state or the "
    "unfinished run. Nothing was changed.",
}}


@router.get("/{job_id}/history", dependencies=[Depends(scope("job.read"))])
async def history(
    job_id: JobIdDep, resources: ResourcesDep, principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=200, description="How many runs, newest first.")] = 30,
) -> HistoryPublic:
    """The job's last runs as a grid: its tasks in order, each run's task states."""
    tasks, rows = await resources.read(
        lambda conn: run_grid(conn, job_id, principal.tenant, limit))
    return HistoryPublic(tasks=tasks, runs=[HistoryRunPublic(
        id=row.run.id, number=row.run.number, trigger=row.run.trigger, state=row.run.state,
        started_at=row.run.started_at, finished_at=row.run.finished_at, tasks=row.tasks,
    ) for row in rows])


@router.post("/{job_id}/commit", responses=_CONFLICT, dependencies=[Depends(scope("job"))])
def commit(
    job_id: JobIdDep, session: SessionDep, resources: ResourcesDep, now: NowDep,
    principal: PrincipalDep,
) -> JobPublic:
    """Make a draft (NEW) job live: a one-off job gets its run, a cron job its next fire."""
    visible_job(session, job_id, principal.tenant)
    live = commit_job(session, job_id, now)
    detail = _shown_and_committed(session, lambda: read_job(session, job_id))
    resources.relay_now(live.outbox_ids)
    return JobPublic.of_detail(detail, resources.served_types())


@router.patch(
    "/{job_id}", dependencies=[Depends(require_json), Depends(scope("job"))], responses=_CONFLICT
)
def update(
    job_id: JobIdDep, patch: JobUpdate, session: SessionDep, resources: ResourcesDep, now: NowDep,
    *, principal: PrincipalDep, limits: LimitsDep,
) -> JobPublic:
    """Change the fields given (each replaces the old value whole); bumps ``version``.

    The definition (tasks, params, secure params, canary, failure threshold, timeout,
    task defaults, priority) cannot change while a run is unfinished: a run keeps the
    definition it started with. ``enabled: false`` stops a cron job firing.
    """
    visible_job(session, job_id, principal.tenant)
    check_params_sizes(patch, limits.max_params_bytes)
    check_job(session, resources.egress, patch)
    try:
        update_job(session, job_id, patch, now, resources.secrets)
    except ValidationError as error:
        # The merged spec broke a rule of a create (a graph rule, a missing name...):
        # reported like the request's own validation errors.
        errors = [{**e, "loc": ("body", *e["loc"])} for e in error.errors()]
        names = {"tasks": [{"name": task.name} for task in patch.tasks or []]}
        raise RequestValidationError(errors, body=names) from error
    detail = _shown_and_committed(session, lambda: read_job(session, job_id))
    return JobPublic.of_detail(detail, resources.served_types())


@router.put(
    "/{job_id}", dependencies=[Depends(require_json), Depends(scope("job"))],
    responses={**_CONFLICT, 201: {"model": JobApplied, "description": "Created."}},
)
def apply(
    job_id: Annotated[str, Path(min_length=1, max_length=200,
                                description="The job's name, the same as the body's.")],
    spec: JobCreate, session: SessionDep, resources: ResourcesDep, *, now: NowDep,
    response: Response, principal: PrincipalDep, limits: LimitsDep,
    dry_run: Annotated[bool, Query(description="Answer the changes, change nothing.")] = False,
) -> JobApplied:
    """Make the job of this name what the spec says (`stellwerk apply`).

    It is created, or what differs is changed, or nothing when nothing does; the
    changes come back, secrets sealed. A spec that does not mention `secure_params`
    (or webservice header values) keeps the stored ones. The definition cannot change
    while a run is unfinished (409).
    """
    if job_id != spec.name:
        raise InvalidInput(("body", "name"), f"is {spec.name!r}, the path names {job_id!r}")
    check_params_sizes(spec, limits.max_params_bytes)
    spec = spec.model_copy(update={"tenant": tenant_of_new_job(principal, spec.tenant)})
    check_job(session, resources.egress, spec)
    applied = apply_job(session, spec, now, resources.secrets, dry_run=dry_run)
    shown_id = applied.job_id
    detail = _shown_and_committed(
        session, lambda: None if shown_id is None else read_job(session, shown_id))
    resources.relay_now(applied.outbox_ids)
    if applied.action == "created" and not dry_run:
        response.status_code = 201
    job = None if detail is None else JobPublic.of_detail(detail, resources.served_types())
    return JobApplied(
        action=applied.action, dry_run=dry_run, job=job, run_id=applied.run_id,
        changes=[ChangePublic(path=c.path, before=c.before, after=c.after)
                 for c in applied.changes],
    )


@router.delete(
    "/{job_id}", status_code=204, response_class=Response, responses=_CONFLICT,
    dependencies=[Depends(scope("job"))],
)
def delete(
    job_id: JobIdDep, session: SessionDep, resources: ResourcesDep, principal: PrincipalDep, *,
    now: NowDep,
    force: Annotated[bool, Query(description="Cancel the job's unfinished runs first.")] = False,
) -> Response:
    """Delete the job with its runs, task runs, journal, logs, storage and subscriptions."""
    visible_job(session, job_id, principal.tenant)
    delete_job(
        session, job_id, force=force, now=now,
        cancel_run=lambda run_id: resources.control.run_action(run_id, "cancel", principal.name),
    )
    session.commit()
    return Response(status_code=204)


def _shown_and_committed(session: Session, read: Callable[[], Shown]) -> Shown:
    """What ``read`` finds of this transaction's changes, then the commit.

    Read in the same transaction, before the commit, the answer shows exactly what was
    committed (an engine may move a run on as soon as the relay sends its message), and
    costs no transaction of its own: read after the commit, it began one (a BEGIN) that
    the session's close then rolled back, two round trips for nothing in every write.
    The session is flushed first: the reads are plain SQL, which autoflush does not see.
    """
    session.flush()
    shown = read()
    session.commit()
    return shown
