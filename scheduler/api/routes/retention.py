"""``/prune``: retention on demand, for ``stellwerk prune --older-than``."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from scheduler.api.deps import NowDep, PrincipalDep, ResourcesDep, require_json, scope
from scheduler.api.retention_schemas import PrunePublic, PruneRequest
from scheduler.services.retention import prune_now, prune_scope

router = APIRouter(tags=["retention"])


async def get_keep_runs(request: Request) -> int:
    """``STELLWERK_RETENTION_KEEP_RUNS`` as the API was started with (async: no thread)."""
    keep: int = request.app.state.retention_keep_runs
    return keep


KeepRunsDep = Annotated[int, Depends(get_keep_runs)]


@router.post("/prune", dependencies=[Depends(scope("job")), Depends(require_json)])
def prune_history(
    body: PruneRequest, resources: ResourcesDep, now: NowDep, principal: PrincipalDep,
    default_keep: KeepRunsDep,
) -> PrunePublic:
    """Delete finished runs older than ``older_than_s`` with all that hangs off them.

    Each job's last ``keep_runs`` runs stay, and so do unfinished runs. A call deletes
    a few batches, each its own short transaction; call again while ``more`` is true.
    """
    keep = default_keep if body.keep_runs is None else body.keep_runs
    cut = prune_scope(principal, now, timedelta(seconds=body.older_than_s), keep, body.tenant)
    pruned = prune_now(resources.sessions, cut)
    return PrunePublic(cutoff=cut.cutoff, keep_runs=keep, tenant=cut.tenant, runs=pruned.runs,
                       fires=pruned.fires, more=pruned.more)
