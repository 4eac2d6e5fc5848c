"""API tokens: issue (the value is returned once), list, delete, and look up by value.

Only the SHA-256 of a token is stored. A token is 32 random bytes, so a plain hash is
enough (nothing to brute-force, no salt needed) and lets the lookup be an index probe on
the hash: no token is ever compared byte by byte, so timing reveals nothing.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from common.persistence.models import ApiToken
from scheduler.services.access import Principal, require_within
from scheduler.services.errors import InvalidInput, NotFound
from scheduler.services.pages import Page, decode_cursor, encode_cursor

TOKEN_PREFIX = "stw_"  # tells a leaked Stellwerk token apart in logs and secret scanners


@dataclass(frozen=True)
class NewToken:
    """What ``POST /tokens`` asks for (already validated)."""

    name: str
    scopes: Sequence[str]
    tenant: str | None
    expires_at: datetime | None


def hash_token(value: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(value.encode()).hexdigest()


def issue_token(
    session: Session, creator: Principal, request: NewToken, now: datetime
) -> tuple[ApiToken, str]:
    """A new token row and its value, unless it would exceed ``creator``'s rights (403)."""
    require_within(creator, request.scopes, request.tenant, request.expires_at)
    value = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        id=uuid4(), name=request.name, token_hash=hash_token(value),
        scopes=sorted(set(request.scopes)), tenant=request.tenant, created_by=creator.name,
        created_at=now, expires_at=request.expires_at,
    )
    session.add(token)
    session.flush()
    return token, value


def list_tokens(
    session: Session, tenant: str | None, limit: int, cursor: str | None = None
) -> Page[ApiToken]:
    """The tokens a caller of ``tenant`` may see (None: all), newest first, by pages."""
    query = select(ApiToken)
    if tenant is not None:
        query = query.where(ApiToken.tenant == tenant)
    if cursor is not None:
        created_at, token_id = _token_key(decode_cursor(cursor, 2))
        query = query.where(
            tuple_(ApiToken.created_at, ApiToken.id) < tuple_(created_at, token_id)
        )
    query = query.order_by(ApiToken.created_at.desc(), ApiToken.id.desc()).limit(limit + 1)
    rows = list(session.scalars(query))
    last = rows[limit - 1] if len(rows) > limit else None
    next_cursor = encode_cursor([last.created_at.isoformat(), str(last.id)]) if last else None
    return Page(rows[:limit], next_cursor)


def _token_key(key: list[Any]) -> tuple[datetime, UUID]:
    try:
        return datetime.fromisoformat(key[0]), UUID(key[1])
    except (TypeError, ValueError) as error:
        raise InvalidInput(("query", "cursor"), "not a cursor returned by this API") from error


def delete_token(session: Session, token_id: UUID, tenant: str | None) -> None:
    """Delete the token; one of another tenant is :class:`NotFound`, as if it did not exist."""
    query = delete(ApiToken).where(ApiToken.id == token_id)
    if tenant is not None:
        query = query.where(ApiToken.tenant == tenant)
    if session.execute(query.returning(ApiToken.id)).first() is None:
        raise NotFound("token", token_id)


def principal_of(session: Session, value: str, now: datetime) -> Principal | None:
    """The principal of a token value, or None if it is unknown, deleted or expired."""
    token = session.scalars(
        select(ApiToken).where(ApiToken.token_hash == hash_token(value))
    ).one_or_none()
    if token is None or (token.expires_at is not None and token.expires_at <= now):
        return None
    return Principal(
        name=actor_name(token.name), scopes=frozenset(token.scopes), tenant=token.tenant,
        expires_at=token.expires_at,
    )


def actor_name(token_name: str) -> str:
    """How a token's actions are signed in the journal: ``token:<name>``, never ``admin``."""
    return f"token:{token_name}"
