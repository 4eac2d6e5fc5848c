"""Dependencies of the routes, as ``Annotated`` aliases (``SessionDep``, ``PrincipalDep``...).

Each takes what it needs from the request rather than from other dependencies. FastAPI
solves a dependency's own dependencies every time the dependency appears, cached or
not: with the principal depending on the resources and the bearer scheme, a job's read
solved 19 dependencies, about a quarter of the API's CPU under load (bench/README.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from email.message import Message
from typing import Annotated, TypeVar
from uuid import UUID

from fastapi import Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security.utils import get_authorization_scheme_param
from sqlalchemy.orm import Session

from scheduler.api.auth import Principal
from scheduler.api.errors import Unauthorized, UnsupportedMediaType
from scheduler.api.resources import Resources
from scheduler.services.access import Scope, require_scope
from scheduler.services.job_names import job_id_of

T = TypeVar("T")

def resources_of(request: Request) -> Resources:
    """The resources the app's lifespan opened."""
    resources: Resources = request.app.state.resources
    return resources


async def get_resources(request: Request) -> Resources:
    """The resources the app's lifespan opened (async: no thread hop for a lookup)."""
    return resources_of(request)


ResourcesDep = Annotated[Resources, Depends(get_resources)]


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A session per request; closing it rolls back whatever was not committed.

    Async on purpose: the cleanup of a sync generator dependency needs a free thread,
    and a request waiting for one while its session held a connection starved the pool
    (200 clients: every thread waiting for a connection, every connection held by a
    request waiting for a thread). Closing only hands the connection back to the pool.
    """
    session = resources_of(request).sessions()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


async def get_now(request: Request) -> datetime:
    """The request's time, from the app's clock (tests may pass their own)."""
    return resources_of(request).clock()


NowDep = Annotated[datetime, Depends(get_now)]


async def in_session(resources: Resources, read: Callable[[Session], T]) -> T:
    """``read`` in a session of its own, on a request thread.

    For the lookups of dependencies every route has (an API token, a job's name): were
    they to take the request's session, every request would pay for one, the reads the
    event loop answers (:data:`Resources.reads`) included.
    """

    def run() -> T:
        with resources.sessions() as session:
            return read(session)

    return await run_in_threadpool(run)


async def get_principal(request: Request) -> Principal:
    """The caller behind the bearer token; 401 without a valid one.

    Async, as every dependency that may do no I/O: a sync one costs a hop to a request
    thread and back (about a third of a millisecond of CPU each, measured). Only an API
    token's lookup goes to a thread. Every request solves it: it depends on as little as
    it can (each dependency FastAPI solves costs some 15-30 µs of CPU): the request.
    Solved once, it is kept on the request: the scope check and a job's name lookup
    take it from there rather than as dependencies of their own.
    """
    known: Principal | None = getattr(request.state, "principal", None)
    if known is not None:
        return known
    scheme, token = get_authorization_scheme_param(request.headers.get("authorization"))
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    resources = resources_of(request)
    authenticator = resources.authenticator
    principal = authenticator.admin(token) or await in_session(
        resources, lambda session: authenticator.api_token(session, token, resources.clock()))
    if principal is None:
        raise Unauthorized("invalid bearer token (unknown, deleted or expired)")
    request.state.principal = principal
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def scope(*any_of: Scope) -> Callable[[Request], Awaitable[None]]:
    """A route dependency: 403 naming the scope unless the caller has one of ``any_of``.

    Used as ``dependencies=[Depends(scope("job"))]`` on every route, so that a route's
    decorator says what it needs; the principal is resolved once per request.
    """

    async def check(request: Request) -> None:
        require_scope(await get_principal(request), any_of)

    check.required_scopes = any_of  # type: ignore[attr-defined]  # read by the route audit
    return check


async def require_json(request: Request) -> None:
    """415 unless the body is declared JSON; runs before the body is validated."""
    message = Message()
    message["content-type"] = request.headers.get("content-type", "")
    subtype = message.get_content_subtype()
    if message.get_content_maintype() != "application" or not (
        subtype == "json" or subtype.endswith("+json")
    ):
        declared = request.headers.get("content-type") or "none"
        raise UnsupportedMediaType(f"the body must be application/json (got {declared})")


async def job_ref(
    job_id: Annotated[str, Path(
        min_length=1, max_length=200, description="The job's id, or its name in its tenant.",
    )],
    request: Request,
) -> UUID:
    """The id of the job the path names by id or by name (issue 17); a name is looked up."""
    try:
        return UUID(job_id)
    except ValueError:
        tenant = (await get_principal(request)).tenant
        return await in_session(
            resources_of(request), lambda session: job_id_of(session, job_id, tenant))


JobIdDep = Annotated[UUID, Depends(job_ref)]
