"""Who is calling: bearer tokens resolved to a principal with scopes.

Only the bootstrap admin token exists yet; the token table (with scopes and tenants,
SPEC §6) will be looked up in :meth:`Authenticator.authenticate` and scope checks
added as dependencies on top of :class:`Principal`.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from pydantic import SecretStr

ADMIN_SCOPES = frozenset({"job"})


@dataclass(frozen=True)
class Principal:
    """An authenticated caller; ``tenant`` None means it sees every tenant."""

    name: str
    scopes: frozenset[str]
    tenant: str | None = None


class Authenticator:
    """Checks bearer tokens; without an admin token configured, none is accepted."""

    def __init__(self, admin_token: SecretStr | None) -> None:
        self._admin = admin_token.get_secret_value().encode() if admin_token else None

    def authenticate(self, token: str) -> Principal | None:
        """The principal of ``token``, or None if it is not a valid token."""
        # Constant-time, so that response times reveal nothing about the token.
        if self._admin and hmac.compare_digest(token.encode(), self._admin):
            return Principal(name="admin", scopes=ADMIN_SCOPES)
        return None
