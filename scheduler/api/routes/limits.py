"""``/limits``: operators' flow limits, and what every limited key is used by (issue 16).

``type:NAME`` limits the active attempts of a task type, ``tenant:NAME`` those of a
tenant (and sets its ``weight`` in the turns), ``key:NAME`` and ``rate:NAME`` override
what tasks state for their keys. A change takes effect within a second.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from scheduler.api.deps import NowDep, PrincipalDep, SessionDep, require_json, scope
from scheduler.services import access
from scheduler.services.access import Principal
from scheduler.services.flow_limits import (
    LimitView,
    check_key,
    delete_limit,
    list_limits,
    set_limit,
)

router = APIRouter(prefix="/limits", tags=["limits"])
# A known prefix and a name of at most 200 characters (``services.flow_limits.check_key``).
Key = Annotated[str, Path(pattern=r"^(type:.{1,200}|tenant:.{0,200}|key:.{1,200}|rate:.{1,200})$",
                          description="type:NAME, tenant:NAME, key:NAME or rate:NAME.")]


class LimitSet(BaseModel):
    """A key's limit: a number of active attempts, or of starts ``per`` seconds."""

    model_config = ConfigDict(extra="forbid")

    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    per: float | None = Field(default=None, gt=0, le=86_400,
                              description="Seconds: the window of a rate (rate:NAME).")
    weight: int | None = Field(default=None, ge=1, le=100,
                               description="A tenant's share of the turns (tenant:NAME).")

    @model_validator(mode="after")
    def _something(self) -> LimitSet:
        if self.limit is None and self.weight is None:
            raise ValueError("give a limit, a weight, or both")
        return self


class LimitPublic(BaseModel):
    """A key: its limit (None: what its tasks state), and how many hold or wait for it."""

    key: str
    limit: int | None
    per: float | None
    weight: int | None
    active: int
    waiting: int

    @staticmethod
    def of(view: LimitView) -> LimitPublic:
        """The answer for one key."""
        return LimitPublic(key=view.key, limit=view.limit, per=view.per_s, weight=view.weight,
                           active=view.active, waiting=view.waiting)


class LimitsPublic(BaseModel):
    """Every key with a limit, a slot held or a waiter."""

    data: list[LimitPublic]


def require_unbound(principal: Principal) -> None:
    """Limits are shared by every tenant: a tenant-bound token may read, not change them."""
    access.require_unbound(principal, "limits", "change one")


@router.get("", dependencies=[Depends(scope("job.read"))])
def list_(session: SessionDep, principal: PrincipalDep) -> LimitsPublic:
    """Every limited key, by key, with its usage now.

    A tenant-bound token sees the shared keys and its own tenant's, not other tenants'.
    """
    views = list_limits(session, principal.tenant)
    return LimitsPublic(data=[LimitPublic.of(view) for view in views])


@router.put("/{key}", dependencies=[Depends(scope("job")), Depends(require_json)])
def put(
    key: Key, body: LimitSet, session: SessionDep, now: NowDep, principal: PrincipalDep,
) -> LimitPublic:
    """Set the key's limit (and a rate's window, a tenant's weight); effective within 1 s."""
    require_unbound(principal)
    check_key(key)
    set_limit(session, key, limit=body.limit, per_s=body.per, weight=body.weight, now=now)
    session.commit()
    return next(LimitPublic.of(v) for v in list_limits(session) if v.key == key)


@router.delete("/{key}", status_code=204, response_class=Response,
               dependencies=[Depends(scope("job"))])
def delete(key: Key, session: SessionDep, principal: PrincipalDep) -> Response:
    """Remove the key's limit: what waits for it goes as its tasks' own limits allow."""
    require_unbound(principal)
    delete_limit(session, key)
    session.commit()
    return Response(status_code=204)
