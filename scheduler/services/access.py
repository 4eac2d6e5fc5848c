"""Who may do what: scopes, tenants and the rule that rights can only be narrowed.

The rules: docs/decisions.md, "Tokens, scopes and tenants".

Pure: the API's scope dependencies, the token service and the tenant checks all decide
with these functions, so the rules live in one place and are tested without servers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from scheduler.services.errors import Forbidden

Scope = Literal["job", "job.read", "job.task"]
SCOPES: frozenset[str] = frozenset(get_args(Scope))
# ``job`` implies every scope; the two narrow ones imply nothing else (docs/decisions.md,
# "Tokens, scopes and tenants").
_IMPLIED: dict[str, frozenset[str]] = {"job": SCOPES}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller; ``tenant`` None means it sees every tenant.

    ``expires_at`` is the token's expiry (None: never), so that a token it creates
    cannot outlive it.
    """

    name: str
    scopes: frozenset[str]
    tenant: str | None = None
    expires_at: datetime | None = None

    @property
    def rights(self) -> frozenset[str]:
        """Its scopes with what they imply."""
        return implied(self.scopes)


def implied(scopes: Iterable[str]) -> frozenset[str]:
    """``scopes`` with every scope they imply (``job`` implies all)."""
    return frozenset().union(*(_IMPLIED.get(scope, {scope}) for scope in scopes))


def require_scope(principal: Principal, any_of: tuple[str, ...]) -> None:
    """:class:`Forbidden` naming the scope(s) missing unless the principal has one of them."""
    if principal.rights.isdisjoint(any_of):
        wanted = " or ".join(repr(scope) for scope in any_of)
        raise Forbidden(f"this needs scope {wanted}; the token has {_listed(principal.scopes)}")


def require_unbound(principal: Principal, shared: str, change: str) -> None:
    """:class:`Forbidden` for a tenant-bound token changing what every tenant shares.

    ``shared`` names the things (``worker types``), ``change`` what the token may not do
    to one (``register or delete one``).
    """
    if principal.tenant is not None:
        raise Forbidden(
            f"the token is bound to tenant {principal.tenant!r}: {shared} are shared by "
            f"every tenant, so only a token without a tenant may {change}"
        )


def require_within(
    principal: Principal, scopes: Iterable[str], tenant: str | None, expires_at: datetime | None
) -> None:
    """:class:`Forbidden` naming each right a new token would have beyond the creator's."""
    excess = sorted(implied(scopes) - principal.rights)
    faults = [f"scope {_listed(excess)}"] if excess else []
    if principal.tenant is not None and tenant != principal.tenant:
        asked = "no tenant (every tenant)" if tenant is None else f"tenant {tenant!r}"
        faults.append(f"{asked}: the token is bound to tenant {principal.tenant!r}")
    limit = principal.expires_at
    if limit is not None and (expires_at is None or expires_at > limit):
        faults.append(f"expiry after the token's own ({limit.isoformat()})")
    if faults:
        raise Forbidden("a token cannot create a token with more rights than its own: "
                        + "; ".join(faults))


def tenant_of_new_job(principal: Principal, tenant: str) -> str:
    """The tenant a job created by ``principal`` belongs to: a bound token's own.

    A tenant-bound token that names no tenant creates in its own; naming another is
    :class:`Forbidden`, never silently rewritten.
    """
    if principal.tenant is None:
        return tenant
    if tenant not in ("", principal.tenant):
        raise Forbidden(
            f"the token is bound to tenant {principal.tenant!r}: cannot create a job of "
            f"tenant {tenant!r}"
        )
    return principal.tenant


def listed_tenant(principal: Principal, requested: str | None) -> str | None:
    """The tenant a list is restricted to: a bound token's own, whatever it asked for.

    Asking a bound token's list for another tenant is :class:`Forbidden`, not an empty
    page that would look like "that tenant has nothing".
    """
    if principal.tenant is None:
        return requested
    if requested not in (None, principal.tenant):
        raise Forbidden(
            f"the token is bound to tenant {principal.tenant!r}: cannot list tenant "
            f"{requested!r}"
        )
    return principal.tenant


def _listed(scopes: Iterable[str]) -> str:
    return ", ".join(repr(scope) for scope in sorted(scopes)) or "none"


def tenant_of_new_subscription(principal: Principal, tenant: str | None) -> str | None:
    """The tenant a new subscription selects (None: every tenant), like a new job's.

    A bound token's subscription always selects its own tenant's events; naming another
    is :class:`Forbidden`.
    """
    if principal.tenant is None:
        return tenant
    if tenant not in (None, principal.tenant):
        raise Forbidden(
            f"the token is bound to tenant {principal.tenant!r}: cannot subscribe to "
            f"tenant {tenant!r}"
        )
    return principal.tenant
