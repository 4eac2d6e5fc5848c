"""``/runs``: a run with its tasks, its journal, and task logs."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Header, Query
from fastapi.responses import PlainTextResponse, Response

from scheduler.api.deps import SessionDep
from scheduler.api.schemas import JournalEntryPublic, JournalPublic, LogsPublic, RunPublic
from scheduler.services.run_queries import get_run, journal, task_logs

router = APIRouter(prefix="/runs", tags=["runs"])


@router.get("/{run_id}")
def read(run_id: UUID, session: SessionDep) -> RunPublic:
    """The run with its state, progress and tasks."""
    return RunPublic.of_detail(get_run(session, run_id))


@router.get("/{run_id}/journal")
def read_journal(run_id: UUID, session: SessionDep) -> JournalPublic:
    """Every state change of the run and its tasks, oldest first."""
    return JournalPublic(entries=[JournalEntryPublic.of(e) for e in journal(session, run_id)])


@router.get(
    "/{run_id}/tasks/{task}/logs", response_model=LogsPublic,
    responses={200: {"content": {"text/plain": {}}, "description": "The task's log lines."}},
)
def read_logs(
    run_id: UUID, task: str, session: SessionDep,
    attempt: Annotated[int | None, Query(ge=0, description="Only this attempt.")] = None,
    accept: Annotated[str, Header()] = "application/json",
) -> Response | LogsPublic:
    """A task's log (``task`` is its name or task run id); text with ``Accept: text/plain``."""
    rows = task_logs(session, run_id, task, attempt)
    if _wants_text(accept):
        return PlainTextResponse("".join(f"{row.line}\n" for row in rows))
    return LogsPublic.of(rows)


def _wants_text(accept: str) -> bool:
    """Plain text only when asked for it and JSON is not also acceptable."""
    return "text/plain" in accept and "application/json" not in accept
