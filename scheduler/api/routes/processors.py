"""``GET /processors``: task types and the live workers serving them (docs/processors.md)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from common.messaging.liveness import live_workers
from scheduler.api.deps import PrincipalDep, ResourcesDep, SessionDep, scope
from scheduler.api.schemas import ProcessorPublic, ProcessorsPublic
from scheduler.services.processors import processors

router = APIRouter(prefix="/processors", tags=["processors"])


@router.get("", dependencies=[Depends(scope("job.read"))])
def read(
    session: SessionDep, resources: ResourcesDep, principal: PrincipalDep,
) -> ProcessorsPublic:
    """Each type a live worker serves, and each type READY tasks wait for (``served``).

    A tenant-bound token sees its tenant's READY tasks only.
    """
    views = processors(session, live_workers(resources.redis), principal.tenant)
    return ProcessorsPublic(data=[ProcessorPublic.of(view) for view in views])
