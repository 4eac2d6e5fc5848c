"""Binding the tasks of registered worker types when a job is written (create, PATCH).

A task whose ``type`` is a registered worker type gets ``tasks.binding``: the engine
(queue) its attempts go to, the params they carry (the template's, the url, the
task's own) and its secure params with the merged headers, sealed. Binding here, in
the API's transaction, rather than at dispatch keeps the engine as it is: it reads
the binding with the task and never needs a secret key (merging sealed headers
needs one) nor a lookup per dispatch; and a run keeps the definition it started with,
as for every other definition field. A worker type changed later reaches a job when
its tasks are next written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from common.domain.spec import JobSpec, TaskDefaults
from common.domain.worker_types import Binding, bind
from common.secure_params import NoSecretKey, SecretBox
from scheduler.services.errors import InvalidInput
from scheduler.services.worker_types import registered


@dataclass(frozen=True)
class BoundTask:
    """A bound task: the defaults its settings fall back to, and its ``binding`` column."""

    defaults: TaskDefaults
    column: dict[str, Any]


def bind_tasks(session: Session, spec: JobSpec, secrets: SecretBox) -> dict[str, BoundTask]:
    """The bound tasks of ``spec`` by name (tasks of other types are not in it)."""
    types = registered(session, {task.type for task in spec.tasks}, secrets)
    bound: dict[str, BoundTask] = {}
    for position, task in enumerate(spec.tasks):
        worker_type = types.get(task.type)
        if worker_type is None:
            continue
        where = ("body", "tasks", position, "secure_params")
        try:
            binding = bind(task, worker_type, spec.webservice, spec.task_defaults)
        except ValueError as error:
            raise InvalidInput(where, str(error)) from error
        bound[task.name] = BoundTask(binding.defaults, _column(binding, secrets, where))
    return bound


def _column(
    binding: Binding, secrets: SecretBox, where: tuple[str | int, ...]
) -> dict[str, Any]:
    sealed = None
    if binding.secure_params:
        try:
            sealed = secrets.seal(binding.secure_params)
        except NoSecretKey as error:
            raise InvalidInput(where, f"cannot be stored: {error}") from error
    return {
        "worker_type": binding.worker_type, "engine": binding.engine, "params": binding.params,
        "sealed_secure_params": sealed, "defaults": binding.defaults.model_dump(mode="json"),
    }


def bound_defaults(column: dict[str, Any] | None, job_defaults: TaskDefaults) -> TaskDefaults:
    """The defaults a stored task's settings were resolved against.

    A PATCH reads a setting equal to them back as "not set" (``job_update``), so the
    template of a bound task's type counts like the job's own defaults.
    """
    if not column or "defaults" not in column:
        return job_defaults
    return TaskDefaults.model_validate(column["defaults"])
