"""Dependencies of the routes, as ``Annotated`` aliases (``SessionDep``, ``PrincipalDep``...)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from email.message import Message
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from scheduler.api.auth import Principal
from scheduler.api.errors import Unauthorized, UnsupportedMediaType
from scheduler.api.resources import Resources

# Stateless: it only reads the header and documents the scheme in OpenAPI. Errors are
# raised by ``get_principal`` so that they come out as problem+json like all others.
_bearer = HTTPBearer(auto_error=False, description="The admin token or an API token.")


def get_resources(request: Request) -> Resources:
    """The resources the app's lifespan opened."""
    resources: Resources = request.app.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]


def get_session(resources: ResourcesDep) -> Iterator[Session]:
    """A session per request; closing it rolls back whatever was not committed."""
    with resources.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def get_now(resources: ResourcesDep) -> datetime:
    """The request's time, from the app's clock (tests may pass their own)."""
    return resources.clock()


NowDep = Annotated[datetime, Depends(get_now)]


def get_principal(
    resources: ResourcesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller behind the bearer token; 401 without a valid one."""
    if credentials is None:
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    principal = resources.authenticator.authenticate(credentials.credentials)
    if principal is None:
        raise Unauthorized("invalid bearer token")
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require_json(request: Request) -> None:
    """415 unless the body is declared JSON; runs before the body is validated."""
    message = Message()
    message["content-type"] = request.headers.get("content-type", "")
    subtype = message.get_content_subtype()
    if message.get_content_maintype() != "application" or not (
        subtype == "json" or subtype.endswith("+json")
    ):
        declared = request.headers.get("content-type") or "none"
        raise UnsupportedMediaType(f"the body must be application/json (got {declared})")
