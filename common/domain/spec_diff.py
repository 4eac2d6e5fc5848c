"""What changes between a job as stored and the spec a file says it should be (issue 17).

``stellwerk apply`` sends a whole spec; the server compares it with the job of that
name and changes what differs, nothing when nothing does. The comparison is of
*effective* settings: a task that states ``retries: 0`` where the default is 0 is the
task the server stored, so applying the same file twice changes nothing.

Secrets are write-only: a spec that does not mention ``secure_params`` (or a
``webservice``'s header values) keeps the stored ones (:func:`keep_unsent_secrets`), and
a change of them is shown as sealed, never as values.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.domain.spec import JobSpec, TaskSpec

SEALED = "(sealed)"
# Not compared: who the job is (tenant and name address it), what runs keep (storage),
# and ``draft``, which only a create says (``commit`` ends a draft).
NOT_COMPARED = frozenset({"tenant", "name", "storage", "draft", "tasks"})
# Compared, but no change can set them: a job's identity.
IDENTITY = frozenset({"application"})


@dataclass(frozen=True)
class Change:
    """One difference: ``path`` is a field (``schedule``) or a task's (``tasks.b.params``).

    ``before`` is None for what is added, ``after`` for what is removed.
    """

    path: str
    before: Any = None
    after: Any = None

    @property
    def field(self) -> str:
        """The spec's top-level field this change is of."""
        return self.path.split(".", 1)[0]


def spec_changes(stored: JobSpec, wanted: JobSpec) -> list[Change]:
    """What differs between the stored spec and the wanted one, field by field."""
    before, after = _settings(stored), _settings(wanted)
    changes = [
        Change(name, _shown(name, before.get(name)), _shown(name, after.get(name)))
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    return changes + _task_changes(_tasks(stored), _tasks(wanted))


def keep_unsent_secrets(stored: JobSpec, wanted: JobSpec) -> JobSpec:
    """``wanted`` with the stored secrets where it does not mention them."""
    update: dict[str, Any] = {}
    if "secure_params" not in wanted.model_fields_set:
        update["secure_params"] = stored.secure_params
    old = {task.name: task for task in stored.tasks}
    update["tasks"] = [
        task.model_copy(update={"secure_params": old[task.name].secure_params})
        if "secure_params" not in task.model_fields_set and task.name in old else task
        for task in wanted.tasks
    ]
    web, old_web = wanted.webservice, stored.webservice
    if web is not None and old_web is not None and "headers" not in web.model_fields_set:
        update["webservice"] = web.model_copy(update={"headers": old_web.headers})
    return wanted.model_copy(update=update)


def _settings(spec: JobSpec) -> dict[str, Any]:
    """The job's own settings, as JSON, without its tasks."""
    return spec.model_dump(mode="json", exclude=set(NOT_COMPARED))


def _tasks(spec: JobSpec) -> dict[str, dict[str, Any]]:
    """Each task's effective settings: its own, else the job's defaults."""
    return {task.name: _effective(task, spec) for task in spec.tasks}


def _effective(task: TaskSpec, spec: JobSpec) -> dict[str, Any]:
    defaults = spec.task_defaults
    timeout = task.timeout if task.timeout is not None else defaults.timeout
    backoff = task.retry_backoff if task.retry_backoff is not None else defaults.retry_backoff
    return {
        "type": task.type, "params": task.params, "secure_params": task.secure_params,
        "next": sorted(set(task.next)), "timeout": timeout.total_seconds(),
        "retries": defaults.retries if task.retries is None else task.retries,
        "retry_backoff": backoff.total_seconds(), "confirm": task.confirm,
        "priority": spec.priority if task.priority is None else task.priority,
        "flow": spec.flow_needs(task).to_json(),
    }


def _task_changes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
) -> list[Change]:
    changes = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is None or new is None:
            changes.append(Change(f"tasks.{name}", _shown_task(old), _shown_task(new)))
            continue
        changes += [
            Change(f"tasks.{name}.{key}", _shown(key, old[key]), _shown(key, new[key]))
            for key in old if old[key] != new[key]
        ]
    return changes


def _shown_task(settings: dict[str, Any] | None) -> dict[str, Any] | None:
    if settings is None:
        return None
    return {key: _shown(key, value) for key, value in settings.items()}


def _shown(name: str, value: Any) -> Any:
    """A value as a change shows it: secrets sealed."""
    if value is None:
        return None
    if name == "secure_params":
        return SEALED
    if name == "webservice" and isinstance(value, dict) and value.get("headers"):
        return {**value, "headers": dict.fromkeys(value["headers"], SEALED)}
    return value
