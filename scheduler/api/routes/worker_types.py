"""``/worker-types``: task types served by web services, registered by name.

The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from scheduler.api.deps import NowDep, PrincipalDep, ResourcesDep, SessionDep, require_json, scope
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.limits import LimitsDep
from scheduler.api.schemas import Problem
from scheduler.api.webservice_schemas import WorkerTypeCreate, WorkerTypePublic, WorkerTypesPublic
from scheduler.services.egress_checks import check_worker_type
from scheduler.services.errors import InvalidInput
from scheduler.services.worker_types import (
    delete_type,
    get_type,
    list_types,
    register,
    require_unbound,
)

router = APIRouter(prefix="/worker-types", tags=["worker-types"])
_CONFLICT: dict[int | str, dict[str, Any]] = {409: {
    "model": Problem, "content": {PROBLEM_JSON: {}},
    "description": "The name is taken (create), or a job uses the type (delete).",
}}


@router.post(
    "", status_code=201, responses=_CONFLICT,
    dependencies=[Depends(scope("job")), Depends(require_json)],
)
def create(
    spec: WorkerTypeCreate, session: SessionDep, resources: ResourcesDep, now: NowDep,
    principal: PrincipalDep, *, limits: LimitsDep,
) -> WorkerTypePublic:
    """Register a worker type; job tasks may then say ``"type": "<name>"``.

    Header values are stored sealed and never shown. A token bound to a tenant cannot
    register one: worker types serve every tenant.
    """
    require_unbound(principal)
    params = spec.job_template.params
    size = len(json.dumps(params, separators=(",", ":")).encode())
    if size > limits.max_params_bytes:
        raise InvalidInput(("body", "job_template", "params"),
                           f"is {size} bytes as JSON; the limit is {limits.max_params_bytes}")
    check_worker_type(resources.egress, spec)
    row = register(session, spec, now, resources.secrets, principal.name)
    session.commit()
    return WorkerTypePublic.of(row)


@router.get("", dependencies=[Depends(scope("job.read"))])
def list_(session: SessionDep) -> WorkerTypesPublic:
    """Every registered worker type, by name."""
    return WorkerTypesPublic(data=[WorkerTypePublic.of(row) for row in list_types(session)])


@router.get("/{name}", dependencies=[Depends(scope("job.read"))])
def read(name: str, session: SessionDep) -> WorkerTypePublic:
    """One worker type."""
    return WorkerTypePublic.of(get_type(session, name))


@router.delete(
    "/{name}", status_code=204, response_class=Response, responses=_CONFLICT,
    dependencies=[Depends(scope("job"))],
)
def delete(name: str, session: SessionDep, principal: PrincipalDep) -> Response:
    """Delete a worker type that no job uses (409 naming one that does)."""
    require_unbound(principal)
    delete_type(session, name)
    session.commit()
    return Response(status_code=204)
