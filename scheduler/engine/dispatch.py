"""Building the message that sends one task attempt to its type's queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from common.domain.snapshot import Dispatch
from common.domain.worker_types import dispatched_as
from common.messaging.keys import attempt_key
from common.messaging.messages import EXECUTE_TASK, dispatch_body, task_queue
from common.messaging.publisher import Outgoing

if TYPE_CHECKING:
    from scheduler.engine.loading import RunRecord


def dispatch_message(run: RunRecord, effect: Dispatch, storage: dict[str, Any]) -> Outgoing:
    """The ``stellwerk.execute`` message for ``effect``; its Celery id is the attempt's key.

    A task of a registered worker type goes to its engine's queue (``tasks.webservice``)
    as that engine's type, with the params and sealed secure params of its binding.
    """
    job = run.job
    task = job.tasks[effect.task]
    kind = dispatched_as(task.type, task.binding)
    params, sealed = task.params, task.sealed_secure_params
    if task.binding is not None:
        params, sealed = task.binding["params"], task.binding["sealed_secure_params"]
    task_run_id = run.task_run_ids[effect.task]
    body = dispatch_body(
        task_run_id=task_run_id, run_id=run.id, job_id=job.id,
        job_name=job.name, tenant=job.tenant, task=task.name, type=kind,
        attempt=effect.attempt, params=params, sealed_secure_params=sealed,
        job_params=job.params, sealed_job_secure_params=job.sealed_secure_params, storage=storage,
        timeout_s=task.timeout_s, last_success_start=run.last_success_start,
        last_success_finish=run.last_success_finish, traceparent=run.traceparent,
    )
    return Outgoing(task_queue(kind), EXECUTE_TASK, body, attempt_key(task_run_id, effect.attempt))
