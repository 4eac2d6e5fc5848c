"""``GET /healthz``: for load balancers and compose health checks, without a token."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from common.health import read_crash_loops
from scheduler.api.deps import ResourcesDep
from scheduler.api.resources import Resources
from scheduler.api.schemas import HealthPublic

router = APIRouter(tags=["health"])
log = logging.getLogger("stellwerk.api")


@router.get(
    "/healthz", response_model=HealthPublic,
    responses={503: {"model": HealthPublic, "description":
                     "A dependency is unreachable, or a component is crash-looping."}},
)
def healthz(resources: ResourcesDep, request: Request) -> JSONResponse:
    """200 when PostgreSQL and Redis answer, else 503 naming which does not.

    Under ``stellwerk up`` (``STELLWERK_SUPERVISOR_STATUS`` set) also 503 while a
    component is crash-looping, naming it.
    """
    database = _check("database", lambda: _select_one(resources))
    redis = _check("redis", lambda: bool(resources.redis.ping()))
    status_path = request.app.state.supervisor_status
    looping = read_crash_loops(status_path) if status_path is not None else {}
    ok = database == redis == "ok" and not looping
    body = HealthPublic(status="ok" if ok else "error", database=database, redis=redis,
                        crash_looping=looping)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


def _select_one(resources: Resources) -> bool:
    with resources.engine.connect() as connection:
        return connection.execute(text("select 1")).scalar() == 1


def _check(name: str, probe: Callable[[], bool]) -> str:
    # Any failure means unhealthy; the class name is enough for an operator to start from.
    try:
        return "ok" if probe() else "error"
    except Exception as error:
        log.warning("health check of %s failed: %s", name, error)
        return f"error: {type(error).__name__}"
