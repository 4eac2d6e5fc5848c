"""The API's routes, one module per resource."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from scheduler.api.deps import get_principal
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.routes import health, jobs, processors, runs, schedules
from scheduler.api.schemas import Problem

_PROBLEMS: dict[int | str, dict[str, object]] = {
    status: {
        "model": Problem, "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for status, description in [
        (401, "No valid bearer token."), (404, "An id in the path does not exist."),
        (422, "The request breaks a rule; `errors` says where."),
    ]
}


def api_router() -> APIRouter:
    """Every route of ``/api/v1``; all but the health check need a bearer token."""
    router = APIRouter()
    router.include_router(health.router)
    protected = APIRouter(dependencies=[Depends(get_principal)], responses=_PROBLEMS)
    for module in (jobs, runs, processors, schedules):
        protected.include_router(module.router)
    router.include_router(protected)
    return router
