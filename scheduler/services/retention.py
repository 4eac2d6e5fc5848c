"""Retention on demand (``POST /prune``): who may prune whose history, and how far.

A token with the ``job`` scope may prune; one bound to a tenant prunes its tenant's
jobs only, like every other thing it does, and naming another tenant is refused
rather than answered with zero deletions.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from common.persistence.retention import Pruned, PruneScope, prune
from scheduler.services.access import Principal
from scheduler.services.errors import Forbidden

# Batches per request (of ``BATCH_RUNS`` runs each): a call returns within seconds
# whatever the backlog, and the client calls again while ``more`` is true.
BATCHES_PER_CALL = 10


def prune_now(sessions: sessionmaker[Session], scope: PruneScope) -> Pruned:
    """A few batches of ``scope``, each committed on its own."""
    return prune(sessions, scope, BATCHES_PER_CALL)


def prune_scope(
    principal: Principal, now: datetime, older_than: timedelta, keep_runs: int,
    tenant: str | None,
) -> PruneScope:
    """What ``principal`` asks to prune, narrowed to its tenant; :class:`Forbidden` beyond."""
    if principal.tenant is not None:
        if tenant not in (None, principal.tenant):
            raise Forbidden(f"the token is bound to tenant {principal.tenant!r}: cannot prune "
                            f"tenant {tenant!r}")
        tenant = principal.tenant
    return PruneScope(now - older_than, keep_runs, tenant)
