"""``PUT /runs/{id}/tasks/{task}/outcome``: the post-back (docs/processors.md).

The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from scheduler.api.deps import PrincipalDep, ResourcesDep, SessionDep, require_json, scope
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.schemas import Problem
from scheduler.api.webservice_schemas import OutcomePostBack
from scheduler.services.tenancy import visible_run

router = APIRouter(prefix="/runs", tags=["runs"])
_REFUSED: dict[int | str, dict[str, Any]] = {409: {
    "model": Problem, "content": {PROBLEM_JSON: {}},
    "description": "The task is not READY or ACTIVE, or `attempt` is not its current one; "
    "`detail` names its state. Nothing was changed.",
}}


def _visible(run_id: UUID, session: SessionDep, principal: PrincipalDep) -> None:
    """The tenant check, as a dependency: before the body is read (404, not 422)."""
    visible_run(session, run_id, principal.tenant)


@router.put(
    "/{run_id}/tasks/{task}/outcome", status_code=204, response_class=Response,
    responses=_REFUSED,
    dependencies=[Depends(scope("job.task", "job")), Depends(_visible), Depends(require_json)],
)
def post_back(
    run_id: UUID, task: str, body: OutcomePostBack, resources: ResourcesDep,
    principal: PrincipalDep,
) -> Response:
    """Report a task's outcome (``task`` is its name or task run id).

    Taken while the task is READY or ACTIVE, so a person or another system can complete
    a task of a type no worker serves. An identical repeat for the same attempt is
    answered 204 as the first was.
    """
    resources.reports.apply(run_id, task, body.report(), principal.name)
    return Response(status_code=204)
