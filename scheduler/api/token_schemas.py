"""Bodies of ``/tokens``: ``TokenCreate`` in, ``TokenPublic`` out, ``TokenCreated`` once."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from common.persistence.models import ApiToken
from scheduler.services.access import Scope


class TokenCreate(BaseModel):
    """A new token's name, scopes, and optionally its tenant and expiry."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    scopes: list[Scope] = Field(
        min_length=1, description="`job` (everything), `job.read`, `job.task`."
    )
    tenant: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Bind the token to this tenant; omitted: every tenant.",
    )
    expires_at: datetime | None = Field(
        default=None, description="ISO-8601 with an offset; omitted: never expires."
    )

    @field_validator("expires_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("needs a UTC offset, e.g. 2030-01-01T00:00:00Z")
        return value


class TokenPublic(BaseModel):
    """A token as listed: never its value, which is not stored."""

    id: UUID
    name: str
    scopes: list[str]
    tenant: str | None
    created_by: str
    created_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, token: ApiToken) -> TokenPublic:
        """From a token row."""
        return cls(
            id=token.id, name=token.name, scopes=list(token.scopes), tenant=token.tenant,
            created_by=token.created_by, created_at=token.created_at,
            expires_at=token.expires_at,
        )


class TokenCreated(TokenPublic):
    """The answer to ``POST /tokens``: the only time the value is shown."""

    token: str = Field(description="The bearer token. Shown once: it cannot be read again.")


class TokensPublic(BaseModel):
    """One page of the tokens the caller may see, newest first; ``next_cursor`` as for jobs."""

    data: list[TokenPublic]
    next_cursor: str | None
