"""The environment of a ``shell`` task's process (docs/job-spec.md, "Built-in task types").

The worker's own ``STELLWERK_*`` variables are left out: they hold its database URL,
tokens and secret key, which a job's command has no business reading.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime

from workers.context import TaskContext

WORKER_ONLY_PREFIX = "STELLWERK_"


def shell_environment(ctx: TaskContext, extra: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment, then the task's ``env``, then the contract variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(WORKER_ONLY_PREFIX)}
    env.update(extra)
    env.update(contract_variables(ctx))
    return env


def contract_variables(ctx: TaskContext) -> dict[str, str]:
    """The variables every process run for a task gets; they win over the task's ``env``."""
    return {
        "JOB_ID": str(ctx.job_id),
        "RUN_ID": str(ctx.run_id),
        "TENANT_ID": ctx.tenant,
        "JOB_PARAMS": json.dumps(ctx.job_params),
        "JOB_SECURE_PARAMS": json.dumps(ctx.job_secure_params),
        # The task's own secure params: the only way a process can read them.
        "TASK_SECURE_PARAMS": json.dumps(ctx.secure_params),
        "JOB_STORAGE": json.dumps(ctx.storage),
        "LAST_SUCCESS_START": _iso(ctx.last_success_start),
        "LAST_SUCCESS_FINISH": _iso(ctx.last_success_finish),
        "TASK_NAME": ctx.task,
        "ATTEMPT": str(ctx.attempt),
        "IDEMPOTENCY_KEY": ctx.idempotency_key,
    }


def _iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else ""
