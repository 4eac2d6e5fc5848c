"""Dependencies of the routes, as ``Annotated`` aliases (``SessionDep``, ``PrincipalDep``...)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from email.message import Message
from typing import Annotated, TypeVar
from uuid import UUID

from fastapi import Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from scheduler.api.auth import Principal
from scheduler.api.errors import Unauthorized, UnsupportedMediaType
from scheduler.api.resources import Resources
from scheduler.services.access import Scope, require_scope
from scheduler.services.job_names import job_id_of

T = TypeVar("T")

# Stateless: it only reads the header and documents the scheme in OpenAPI. Errors are
# raised by ``get_principal`` so that they come out as problem+json like all others.
_bearer = HTTPBearer(auto_error=False, description="The admin token or an API token.")


async def get_resources(request: Request) -> Resources:
    """The resources the app's lifespan opened (async: no thread hop for a lookup)."""
    resources: Resources = request.app.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]


async def get_session(resources: ResourcesDep) -> AsyncIterator[Session]:
    """A session per request; closing it rolls back whatever was not committed.

    Async on purpose: the cleanup of a sync generator dependency needs a free thread,
    and a request waiting for one while its session held a connection starved the pool
    (200 clients: every thread waiting for a connection, every connection held by a
    request waiting for a thread). Closing only hands the connection back to the pool.
    """
    session = resources.sessions()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


async def get_now(resources: ResourcesDep) -> datetime:
    """The request's time, from the app's clock (tests may pass their own)."""
    return resources.clock()


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


async def get_principal(
    resources: ResourcesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller behind the bearer token; 401 without a valid one.

    Async, as every dependency that may do no I/O: a sync one costs a hop to a request
    thread and back (about a third of a millisecond of CPU each, measured). Only an API
    token's lookup goes to a thread. Every request solves it: it depends on as little as
    it can (each dependency FastAPI solves costs some 30 µs of CPU).
    """
    if credentials is None:
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    authenticator, token = resources.authenticator, credentials.credentials
    principal = authenticator.admin(token) or await in_session(
        resources, lambda session: authenticator.api_token(session, token, resources.clock()))
    if principal is None:
        raise Unauthorized("invalid bearer token (unknown, deleted or expired)")
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def scope(*any_of: Scope) -> Callable[[Principal], Awaitable[None]]:
    """A route dependency: 403 naming the scope unless the caller has one of ``any_of``.

    Used as ``dependencies=[Depends(scope("job"))]`` on every route, so that a route's
    decorator says what it needs; the principal is resolved once per request.
    """

    async def check(principal: PrincipalDep) -> None:
        require_scope(principal, any_of)

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
    resources: ResourcesDep, principal: PrincipalDep,
) -> UUID:
    """The id of the job the path names by id or by name (issue 17); a name is looked up."""
    try:
        return UUID(job_id)
    except ValueError:
        return await in_session(
            resources, lambda session: job_id_of(session, job_id, principal.tenant))


JobIdDep = Annotated[UUID, Depends(job_ref)]
