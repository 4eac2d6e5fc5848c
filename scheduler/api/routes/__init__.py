"""The API's routes, one module per resource."""

from __future__ import annotations

import inspect
from functools import cache

from fastapi import APIRouter, Depends, Request
from fastapi.routing import APIRoute

from scheduler.api.deps import get_principal
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.openapi import bearer_required
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

    Web-service callbacks carry their own credential in the URL (``callbacks``). The
    routes are added to one router, not included router in router: FastAPI walks every
    level of included routers for each request, about a tenth of a read's CPU here.
    """
    router = APIRouter()
    for module in (health, callbacks):
        _add_routes(router, module.router)
    for module in (jobs, runs, processors, schedules, tokens, metrics, subscriptions, events,
                   postback, worker_types, retention, limits, workers,
                   whoami, job_specs):  # the last two: the web UI's helpers
        _add_routes(router, module.router, protected=True)
    return router


async def _authenticated_and_storable(request: Request) -> None:
    """401 without a valid token, then 422 for input PostgreSQL cannot store.

    One dependency for both: FastAPI solves each dependency of each route anew.
    """
    await get_principal(request)
    await refuse_unstorable(request)


def _add_routes(router: APIRouter, source: APIRouter, *, protected: bool = False) -> None:
    """``source``'s routes added to ``router``, as ``include_router`` would present them.

    ``protected``: they need a bearer token (401, documented in OpenAPI) and refuse
    input PostgreSQL cannot store (422). Every setting ``add_api_route`` takes is copied
    from the route's attribute of that name (:data:`_NOT_COPIED` aside), so that one a
    later FastAPI adds is not dropped without a word.
    """
    dependencies = [Depends(_authenticated_and_storable)] if protected else []
    responses = _PROBLEMS if protected else {}
    for route in source.routes:
        assert isinstance(route, APIRoute), f"{route!r}: only API routes are added"
        settings = {name: getattr(route, name) for name in _route_settings()}
        settings.update(
            methods=sorted(route.methods or ()),
            dependencies=[*dependencies, *route.dependencies],
            responses={**responses, **route.responses},
            openapi_extra=(bearer_required(route.openapi_extra) if protected
                           else route.openapi_extra),
        )
        router.add_api_route(**settings)


# ``add_api_route``'s parameters that are no route attribute: the route is made by the
# router's own route class.
_NOT_COPIED = frozenset({"self", "route_class_override"})


@cache
def _route_settings() -> tuple[str, ...]:
    """The parameters of ``APIRouter.add_api_route`` a route keeps as attributes.

    Read once: the signature is the installed FastAPI's, and every route asks.
    """
    return tuple(name for name in inspect.signature(APIRouter.add_api_route).parameters
                 if name not in _NOT_COPIED)
