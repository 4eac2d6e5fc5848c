"""``/tokens``: create API tokens (the value is shown once), list and delete them.

Any token may create a token with at most its own rights (a narrower delegate, e.g. a
``job.read`` token for a dashboard); listing needs ``job.read`` and deleting ``job``.
A tenant-bound caller sees and deletes only its tenant's tokens.
"""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from scheduler.api.deps import NowDep, PrincipalDep, SessionDep, require_json, scope
from scheduler.api.routes.jobs import Cursor, Limit
from scheduler.api.token_schemas import TokenCreate, TokenCreated, TokenPublic, TokensPublic
from scheduler.services.access import Scope
from scheduler.services.errors import InvalidInput
from scheduler.services.tokens import NewToken, delete_token, issue_token, list_tokens

router = APIRouter(prefix="/tokens", tags=["tokens"])
# Creating needs any scope: what the new token may do is bounded by the caller's own.
_ANY: tuple[Scope, ...] = ("job", "job.read", "job.task")


@router.post(
    "", status_code=201, dependencies=[Depends(require_json), Depends(scope(*_ANY))],
    responses={403: {"description": "The token would have more rights than the caller's."}},
)
def create(
    body: TokenCreate, session: SessionDep, principal: PrincipalDep, now: NowDep
) -> TokenCreated:
    """Create a token; the answer holds its value, which cannot be read again."""
    if body.expires_at is not None and body.expires_at <= now:
        raise InvalidInput(("body", "expires_at"), "must be in the future")
    request = NewToken(body.name, body.scopes, body.tenant, body.expires_at)
    token, value = issue_token(session, principal, request, now)
    session.commit()
    return TokenCreated(**TokenPublic.of(token).model_dump(), token=value)


@router.get("", dependencies=[Depends(scope("job.read"))])
def list_(
    session: SessionDep, principal: PrincipalDep, limit: Limit = 50, cursor: Cursor = None
) -> TokensPublic:
    """The tokens of the caller's tenant (all, for a token without tenant); no values."""
    page = list_tokens(session, principal.tenant, limit, cursor)
    return TokensPublic(
        data=[TokenPublic.of(t) for t in page.items], next_cursor=page.next_cursor
    )


@router.delete(
    "/{token_id}", status_code=204, response_class=Response,
    dependencies=[Depends(scope("job"))],
)
def delete(token_id: UUID, session: SessionDep, principal: PrincipalDep) -> Response:
    """Delete a token: it is refused (401) from the next request on."""
    delete_token(session, token_id, principal.tenant)
    session.commit()
    return Response(status_code=204)
