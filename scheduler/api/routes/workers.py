"""``GET /workers``: every live worker, the types it serves and the attempts it runs."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from common.messaging.liveness import live_workers
from scheduler.api.deps import PrincipalDep, ResourcesDep, SessionDep, scope
from scheduler.api.schemas import LiveWorkerPublic, RunningPublic, WorkersPublic, worker_view
from scheduler.services.run_lists import running_by_worker

router = APIRouter(prefix="/workers", tags=["processors"])


@router.get("", dependencies=[Depends(scope("job.read"))])
def read(session: SessionDep, resources: ResourcesDep, principal: PrincipalDep) -> WorkersPublic:
    """Each live worker: host, types, concurrency, last heartbeat, ACTIVE attempts.

    A tenant-bound token sees its tenant's attempts only (the workers are shared).
    """
    workers = live_workers(resources.redis)
    running = running_by_worker(session, workers, principal.tenant)
    data = []
    for record in workers:
        view = worker_view(record)
        if view is None:
            continue
        data.append(LiveWorkerPublic(
            **view.model_dump(), running=[RunningPublic.model_validate(item)
                                          for item in running.get(view.hostname, [])]))
    return WorkersPublic(data=sorted(data, key=lambda w: w.hostname))
