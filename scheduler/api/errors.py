"""Every error the API returns, as ``application/problem+json`` (RFC 9457), mapped here.

Validation errors list each fault with its location, and the ``detail`` line names
the field or task at fault, because a person reading a 4xx has only the message to go
by (the wording: ``scheduler.services.faults``, shared with the ``stellwerk.jobs``
consumer). Input values are never echoed: they may hold secure params.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from common.unreachable import database_unreachable, redis_unreachable
from scheduler.services import faults
from scheduler.services.errors import Conflict, Forbidden, InvalidInput, NotFound, ServiceError

PROBLEM_JSON = "application/problem+json"
_SERVICE_STATUS: dict[type[ServiceError], int] = {
    Forbidden: 403, NotFound: 404, Conflict: 409, InvalidInput: 422,
}

log = logging.getLogger("stellwerk.api")
RETRY_AFTER_S = 5  # a restarted PostgreSQL or Redis answers again within seconds


class ApiError(Exception):
    """An error decided by the HTTP layer itself (authentication, content type)."""

    status = 400
    headers: Mapping[str, str] | None = None


class Unauthorized(ApiError):
    """No bearer token, or one that is not valid."""

    status = 401
    headers = {"WWW-Authenticate": "Bearer"}


class UnsupportedMediaType(ApiError):
    """The request body is not JSON."""

    status = 415


def problem(
    status: int, detail: str, *, errors: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A problem+json response."""
    body: dict[str, Any] = {
        "type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the one mapping from exceptions to problem responses."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(DataError, _unstorable)
    app.add_exception_handler(Exception, _unexpected)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return problem(exc.status, str(exc), headers=exc.headers)


async def _service_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, InvalidInput):
        errors = [{"loc": list(exc.loc), "msg": exc.msg, "type": "value_error"}]
        return problem(422, faults.line(faults.where(exc.loc), exc.msg), errors=errors)
    status = next((s for cls, s in _SERVICE_STATUS.items() if isinstance(exc, cls)), 400)
    return problem(status, str(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    raw: Sequence[Any] = exc.errors()
    malformed = next((e for e in raw if e.get("type") == "json_invalid"), None)
    if malformed is not None:
        reason = malformed.get("ctx", {}).get("error", "JSON decode error")
        return problem(400, f"malformed JSON body: {reason} (at character {malformed['loc'][-1]})")
    errors = [{"loc": list(e["loc"]), "msg": faults.message(e), "type": e["type"]} for e in raw]
    return problem(422, faults.describe_faults(errors, exc.body), errors=errors)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
        return _method_not_allowed(request)
    return problem(exc.status_code, str(exc.detail), headers=exc.headers)


def _method_not_allowed(request: Request) -> JSONResponse:
    """405 whose ``Allow`` lists the methods of every route of the path (RFC 9110 §15.5.6).

    Starlette names only the methods of the first route that matched the path, and here
    each method of a path is a route of its own: ``DELETE /jobs`` answered
    ``Allow: POST`` although ``GET /jobs`` exists (issue 14).
    """
    allowed = sorted(allowed_methods(request.app.routes, request.scope))
    listed = ", ".join(allowed)
    detail = f"{request.method} is not allowed on {request.url.path}; allowed: {listed}"
    return problem(405, detail, headers={"Allow": listed})


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> set[str]:
    """The methods of the routes that match the request's path (whatever its method).

    Included routers nest (FastAPI >= 0.13x): ``iter_route_contexts`` flattens them as
    the OpenAPI document does, each route with its full path.
    """
    methods: set[str] = set()
    for route in iter_route_contexts(routes):
        match, _ = route.matches(scope)
        if match is not Match.NONE and route.methods:
            methods |= set(route.methods)
    return methods


async def _unstorable(request: Request, exc: Exception) -> JSONResponse:
    """A value the database refused (a backstop: validation should have caught it).

    The transaction is rolled back with the request's session, so nothing changed.
    Only the database's first line is shown: SQLAlchemy's text carries the values.
    """
    assert isinstance(exc, DataError)
    log.warning("database refused a value on %s %s: %s", request.method, request.url.path,
                str(exc.orig).splitlines()[0] if exc.orig else "")
    reason = str(exc.orig).splitlines()[0] if exc.orig else "invalid value"
    return problem(422, f"a value cannot be stored: {reason}")


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    if (server := _unreachable(exc)) is not None:
        log.warning("%s %s: %s is unreachable: %s", request.method, request.url.path,
                    server, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return problem(503, f"{server} is unreachable; nothing was changed, try again",
                       headers={"Retry-After": str(RETRY_AFTER_S)})
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem(500, "internal error; the server log has the details")


def _unreachable(exc: Exception) -> str | None:
    """The server an error says is down or unreachable, if it says so.

    A client retries a 503 (and a load balancer knows it for what it is); a 500 says the
    request itself broke something. A deadlock or a refused value is no outage.
    """
    if database_unreachable(exc):
        return "PostgreSQL"
    if redis_unreachable(exc):
        return "Redis"
    return None
