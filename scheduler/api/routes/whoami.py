"""``GET /whoami``: what the calling token may do, so a client can offer only that.

The web UI reads it after login and hides the actions the token may not take (a
``job.read`` token sees no buttons). Any valid token may ask about itself: no scope is
needed, and nothing secret is answered (the value is never stored, only its hash).
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from scheduler.api.deps import PrincipalDep
from scheduler.services.access import Principal

router = APIRouter(tags=["tokens"])


class WhoAmIPublic(BaseModel):
    """The caller's token: its name, scopes and tenant; never its value."""

    name: str = Field(description="How its actions are journaled: `admin`, `token:<name>`.")
    scopes: list[str] = Field(description="The scopes the token was given.")
    rights: list[str] = Field(description="Its scopes with what they imply (`job`: all).")
    tenant: str | None = Field(description="The tenant it is bound to; null: every tenant.")
    expires_at: datetime | None

    @classmethod
    def of(cls, principal: Principal) -> WhoAmIPublic:
        """From the authenticated principal."""
        return cls(
            name=principal.name, scopes=sorted(principal.scopes),
            rights=sorted(principal.rights), tenant=principal.tenant,
            expires_at=principal.expires_at,
        )


@router.get("/whoami")
async def whoami(principal: PrincipalDep) -> WhoAmIPublic:
    """The calling token's name, scopes (as given and as implied), tenant and expiry."""
    return WhoAmIPublic.of(principal)
