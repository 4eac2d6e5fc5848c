"""The API's routes, one module per resource."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from scheduler.api.deps import bearer_scheme, get_principal
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.payload import refuse_unstorable
from scheduler.api.routes import (
    callbacks,
    events,
    health,
    job_specs,
    jobs,
    limits,
    metrics,
    postback,
    processors,
    retention,
    runs,
    schedules,
    subscriptions,
    tokens,
    whoami,
    worker_types,
    workers,
)
from scheduler.api.schemas import Problem

_PROBLEMS: dict[int | str, dict[str, object]] = {
    status: {
        "model": Problem, "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for status, description in [
        (401, "No valid bearer token."),
        (403, "The token lacks the scope named in `detail`, or the right (tenant)."),
        (404, "An id in the path does not exist."),
        (400, "The body is not well-formed JSON."),
        (413, "The body exceeds `STELLWERK_API_MAX_BODY_BYTES` (1 MiB by default)."),
        (415, "A route that takes a body got one not declared application/json."),
        (422, "The request breaks a rule; `errors` says where."),
        (503, "PostgreSQL or Redis cannot be reached: nothing was changed; try again after "
              "`Retry-After` seconds."),
    ]
}


def api_router() -> APIRouter:
    """Every route of ``/api/v1``; all but the health check need a bearer token.

    Web-service callbacks carry their own credential in the URL (``callbacks``).
    """
    router = APIRouter()
    router.include_router(health.router)
    router.include_router(callbacks.router)
    # Authenticated first, then input PostgreSQL cannot store is refused (422).
    protected = APIRouter(
        dependencies=[Depends(bearer_scheme), Depends(get_principal), Depends(refuse_unstorable)],
        responses=_PROBLEMS,
    )
    for module in (jobs, runs, processors, schedules, tokens, metrics, subscriptions, events):
        protected.include_router(module.router)
    for module in (postback, worker_types, retention, limits, workers):
        protected.include_router(module.router)
    for module in (whoami, job_specs):  # the web UI's helpers
        protected.include_router(module.router)
    router.include_router(protected)
    return router
