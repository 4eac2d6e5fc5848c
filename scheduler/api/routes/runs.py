"""``/runs``: a run with its tasks, its journal, task logs, and a person's actions on it."""

from __future__ import annotations

import zlib
from typing import Annotated, Any, Literal, get_args
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from scheduler.api.deps import PrincipalDep, ResourcesDep, SessionDep, scope
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.list_bodies import page_json
from scheduler.api.log_follow import follow_lines
from scheduler.api.schemas import (
    JournalEntryPublic,
    JournalPublic,
    ListedRunsPublic,
    LogsPublic,
    Problem,
    RunPublic,
)
from scheduler.engine.commands import RunAction, TaskAction
from scheduler.services.access import Scope
from scheduler.services.pages import CURSOR_PATTERN
from scheduler.services.run_lists import RunFilter, list_all_runs
from scheduler.services.run_queries import (
    find_task_run,
    get_run,
    get_run_async,
    journal,
    run_versions,
    task_logs,
)
from scheduler.services.tenancy import visible_run

router = APIRouter(prefix="/runs", tags=["runs"])
RunStateName = Literal[
    "READY", "ACTIVE", "CONFIRM", "PAUSE_REQUESTED", "PAUSED", "CANCEL_REQUESTED",
    "CANCELED", "COMPLETED", "FAILED", "TIMEOUT",
]
TriggerName = Literal["schedule", "catchup", "submit", "api", "manual"]
_REFUSED: dict[int | str, dict[str, Any]] = {409: {
    "model": Problem, "content": {PROBLEM_JSON: {}},
    "description": "The run's (or task's) current state does not allow the action; "
    "`detail` names it. Nothing was changed.",
}}


@router.get("", response_model=ListedRunsPublic, dependencies=[Depends(scope("job.read"))])
async def list_(
    resources: ResourcesDep, principal: PrincipalDep, *,
    state: Annotated[list[RunStateName] | None, Query(description="Repeatable: any of.")] = None,
    trigger: Annotated[list[TriggerName] | None, Query(
        description="Repeatable: any of.")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size.")] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page.",
                                        json_schema_extra={"pattern": CURSOR_PATTERN})] = None,
) -> Response:
    """Runs of every job, newest first (a tenant-bound token's tenant's only)."""
    filters = RunFilter(principal.tenant, tuple(state or ()), tuple(trigger or ()))
    page = await resources.read(lambda conn: list_all_runs(conn, filters, limit, cursor))
    return Response(page_json(page), media_type="application/json")


@router.get(
    "/{run_id}", response_model=RunPublic, dependencies=[Depends(scope("job.read"))],
    responses={304: {"description": "Unchanged since the `ETag` sent in `If-None-Match`."}},
)
async def read(
    run_id: UUID, principal: PrincipalDep, resources: ResourcesDep,
    if_none_match: Annotated[str | None, Header(
        description="The `ETag` of the last read: 304 if the run has not changed since.",
    )] = None,
) -> Response:
    """The run with its state, progress and tasks; a READY task says what it waits for.

    Pollers send the last `ETag` back in `If-None-Match`: an unchanged run is a 304,
    answered from two version numbers without reading or serializing its tasks.
    """
    # The route pollers call: read on the event loop (no request thread, no Session).
    served = await resources.served_now()
    # The versions are read before the run: a change committed in between makes the
    # body newer than its tag (the next poll reads again), never the reverse.
    versions = await resources.read(
        lambda conn: run_versions(conn, run_id, principal.tenant))
    tag = run_etag(*versions, served)
    # no-cache: a browser keeps the body but asks again every time (the UI's fetches).
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if if_none_match is not None and _matches(if_none_match, tag):
        return Response(status_code=304, headers=headers)
    detail = await resources.read(lambda conn: get_run_async(conn, run_id))
    body = RunPublic.of_detail(detail, served)
    return Response(body.model_dump_json(by_alias=True), media_type="application/json",
                    headers=headers)


def run_etag(run_version: int, job_version: int, served: frozenset[str] | None) -> str:
    """A weak tag of what a run read shows.

    The versions, and the live workers' types: a READY task says when no live worker
    serves its type.
    """
    types = "\0".join(sorted(served or ()))
    workers = "-" if served is None else f"{zlib.crc32(types.encode()):x}"
    return f'W/"{run_version}.{job_version}.{workers}"'


def _matches(if_none_match: str, tag: str) -> bool:
    """Whether ``If-None-Match`` names ``tag`` or is ``*`` (any existing run).

    Weak comparison (RFC 9110): a tag sent without its ``W/`` still matches.
    """
    sent = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in sent or tag.removeprefix("W/") in sent


@router.get("/{run_id}/journal", response_model=JournalPublic,
            dependencies=[Depends(scope("job.read"))])
async def read_journal(
    run_id: UUID, resources: ResourcesDep, principal: PrincipalDep, *,
    task: Annotated[str | None, Query(
        max_length=200, description="Only this task's changes (by name); the run's own "
        "changes name no task.")] = None,
    limit: Annotated[int, Query(ge=1, le=5000, description="Page size.")] = 1000,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page.",
                                        json_schema_extra={"pattern": CURSOR_PATTERN})] = None,
) -> Response:
    """The state changes of the run and its tasks, oldest first, a page at a time.

    `next_cursor` is null on the last page. A run's entries are written under its lock,
    so they are numbered in the order they were committed: paging never skips one.
    """
    page = await resources.read(
        lambda conn: journal(conn, run_id, principal.tenant, limit, cursor, task=task))
    body = JournalPublic(entries=[JournalEntryPublic.of(e) for e in page.items],
                         next_cursor=page.next_cursor)
    return Response(body.model_dump_json(by_alias=True), media_type="application/json")


@router.get(
    "/{run_id}/tasks/{task}/logs", response_model=LogsPublic,
    responses={200: {"content": {"text/plain": {}}, "description": "The task's log lines."}},
    dependencies=[Depends(scope("job.read"))],
)
def read_logs(
    run_id: UUID, task: str, session: SessionDep, *, principal: PrincipalDep,
    resources: ResourcesDep,
    attempt: Annotated[int | None, Query(ge=0, description="Only this attempt.")] = None,
    follow: Annotated[bool, Query(
        description="Stream the log as text, new lines as they come, until the task is done."
    )] = False,
    accept: Annotated[str, Header()] = "application/json",
) -> Response | LogsPublic:
    """A task's log (``task`` is its name or task run id); text with ``Accept: text/plain``."""
    visible_run(session, run_id, principal.tenant)
    if follow:
        task_run = find_task_run(session, run_id, task)
        session.close()  # the stream reads with its own short sessions
        return StreamingResponse(
            follow_lines(resources.sessions, task_run.id, attempt), media_type="text/plain"
        )
    rows = task_logs(session, run_id, task, attempt)
    if _wants_text(accept):
        return PlainTextResponse("".join(f"{row.line}\n" for row in rows))
    return LogsPublic.of(rows)


def _wants_text(accept: str) -> bool:
    """Plain text only when asked for it and JSON is not also acceptable."""
    return "text/plain" in accept and "application/json" not in accept


def _run_action_route(action: RunAction) -> None:
    """``POST /runs/{id}/<action>``: one route per action, so each is documented."""

    def act(
        run_id: UUID, session: SessionDep, resources: ResourcesDep, principal: PrincipalDep
    ) -> RunPublic:
        visible_run(session, run_id, principal.tenant)
        resources.control.run_action(run_id, action, principal.name)
        return RunPublic.of_detail(get_run(session, run_id), resources.served_types())

    router.post(
        f"/{{run_id}}/{action}", name=f"{action}_run", summary=f"{action.capitalize()} the run",
        description=_RUN_DOCS[action], responses=_REFUSED, dependencies=[Depends(scope("job"))],
    )(act)


def _task_action_route(action: TaskAction) -> None:
    """``POST /runs/{id}/tasks/{task}/<action>``; ``task`` is a name or a task run id."""

    def act(
        run_id: UUID, task: str, session: SessionDep, resources: ResourcesDep,
        principal: PrincipalDep,
    ) -> RunPublic:
        visible_run(session, run_id, principal.tenant)
        resources.control.task_action(run_id, task, action, principal.name)
        return RunPublic.of_detail(get_run(session, run_id), resources.served_types())

    router.post(
        f"/{{run_id}}/tasks/{{task}}/{action}", name=f"{action}_task",
        summary=f"{action.capitalize()} a task", description=_TASK_DOCS[action],
        responses=_REFUSED, dependencies=[Depends(scope(*_TASK_SCOPES[action]))],
    )(act)


_RUN_DOCS = {
    "cancel": "Cancel unstarted tasks now, stop running ones; the run ends CANCELED.",
    "pause": "Pause READY tasks, let ACTIVE ones finish; the run ends PAUSED.",
    "resume": "Dispatch the paused tasks again; the run goes on.",
    "retry": "Run a FAILED, TIMEOUT or CANCELED run again, without its COMPLETED tasks.",
    "confirm": "Confirm every task waiting for confirmation.",
}
# ``job.task`` settles a single task (confirm, reject); skip and retry change what the
# run does next, so they need ``job`` (docs/decisions.md, "Tokens, scopes and tenants").
_TASK_SCOPES: dict[str, tuple[Scope, ...]] = {
    "confirm": ("job.task", "job"), "reject": ("job.task", "job"),
    "skip": ("job",), "retry": ("job",),
}
_TASK_DOCS = {
    "confirm": "The task waiting in CONFIRM completes; the run goes on.",
    "reject": "The task waiting in CONFIRM is REJECTED; the run fails.",
    "skip": "The task is SKIPPED and counts as done for its successors.",
    "retry": "The task and its descendants run again (also on a COMPLETED run).",
}
for _run_action in get_args(RunAction):
    _run_action_route(_run_action)
for _task_action in get_args(TaskAction):
    _task_action_route(_task_action)
