"""Who is calling: bearer tokens resolved to a principal with scopes and maybe a tenant.

Two kinds of token: the bootstrap admin token from ``STELLWERK_ADMIN_TOKEN`` (scope
``job``, every tenant), and API tokens from the ``api_tokens`` table (docs/decisions.md,
"Tokens, scopes and tenants"), created
with ``POST /tokens``. Scope checks are dependencies (``scheduler.api.deps.scope``) on
top of :class:`Principal`.
"""

from __future__ import annotations

import hmac
from datetime import datetime

from pydantic import SecretStr
from sqlalchemy.orm import Session

from scheduler.services.access import Principal
from scheduler.services.tokens import principal_of

__all__ = ["ADMIN_SCOPES", "Authenticator", "Principal"]

ADMIN_SCOPES = frozenset({"job"})


class Authenticator:
    """Checks bearer tokens: the admin token if one is configured, then the token table."""

    def __init__(self, admin_token: SecretStr | None) -> None:
        self._admin = admin_token.get_secret_value().encode() if admin_token else None

    def admin(self, token: str) -> Principal | None:
        """The admin's principal if ``token`` is the admin token (no I/O), else None."""
        # Constant-time, so that response times reveal nothing about the admin token.
        if self._admin and hmac.compare_digest(token.encode(), self._admin):
            return Principal(name="admin", scopes=ADMIN_SCOPES)
        return None

    @staticmethod
    def api_token(session: Session, token: str, now: datetime) -> Principal | None:
        """An API token's principal (a database read); None if unknown, deleted or expired."""
        # API tokens are found by the hash of the value, never compared byte by byte.
        return principal_of(session, token, now)
