"""A partial change of a job (``PATCH /jobs/{id}``) and how it applies to the stored spec.

Every field of the patch replaces the field of the spec as a whole (``tasks`` is the
whole graph, ``schedule`` the whole schedule, ``labels`` all labels); a field left out
is kept. The result is validated as a new :class:`JobSpec`, so a patch obeys exactly
the rules of a create. Identity fields (``tenant``, ``application``), the ``draft``
flag (``commit`` ends a draft) and ``storage`` (the runs' data) cannot be patched.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from common.domain.spec import (
    MAX_TASKS,
    Instant,
    JobSpec,
    NotNegative,
    Positive,
    Schedule,
    ShortText,
    Strict,
    TaskDefaults,
    TaskSpec,
)
from common.domain.webservice import WebServiceSettings

# What the engine reads of a job while a run goes on (``JobStructure``): changing one of
# these under an unfinished run would give it a definition it did not start with.
DEFINITION_FIELDS = frozenset({
    "tasks", "params", "secure_params", "canary", "failure_threshold", "timeout",
    "task_defaults", "priority", "webservice",
})
# Fields whose change rewrites the task rows (effective settings are stored per task,
# and so is the binding of a task of a registered worker type).
TASK_FIELDS = frozenset({"tasks", "task_defaults", "priority", "webservice"})
# The fields a spec may hold null in (so a PATCH may set them to null).
NULLABLE = frozenset({
    "secure_params", "timeout", "catchup_window", "max_active_runs", "suspend_at",
    "suspend_after", "late_after", "webservice",
})


def _no_null_where_the_spec_has_none(schema: dict[str, Any]) -> None:
    """The published schema of a PATCH: ``null`` only where the spec has one.

    A field left out is kept; a field set to null must be one the spec may hold null
    in, else the merged spec is refused. Validation keeps ``X | None`` (one plain error
    per field); the schema drops the ``null`` that would be refused, so a request the
    schema allows is one the merge takes.
    """
    for name, prop in schema.get("properties", {}).items():
        variants = prop.get("anyOf")
        if name in NULLABLE or not variants:
            continue
        kept = [v for v in variants if v != {"type": "null"}]
        del prop["anyOf"]
        if prop.get("default", 0) is None:
            del prop["default"]
        prop.update(kept[0] if len(kept) == 1 else {"anyOf": kept})


class JobPatch(Strict):
    """The fields of a job spec a ``PATCH`` may change; all optional, with its constraints."""

    model_config = ConfigDict(json_schema_extra=_no_null_where_the_spec_has_none)

    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    description: str | None = None
    type: ShortText | None = None
    owner: ShortText | None = None
    labels: dict[str, str] | None = None
    priority: Annotated[int, Field(ge=0, le=9)] | None = None
    params: dict[str, Any] | None = None
    secure_params: dict[str, Any] | None = None
    tasks: Annotated[list[TaskSpec], Field(min_length=1, max_length=MAX_TASKS)] | None = Field(
        default=None, description="The whole new graph.")
    schedule: Schedule | None = None
    canary: bool | None = None
    failure_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    timeout: Positive | None = None
    task_defaults: TaskDefaults | None = None
    enabled: bool | None = None
    catchup: Literal["none", "latest", "all"] | None = None
    catchup_window: NotNegative | None = None
    overlap: Literal["allow", "skip", "buffer_one", "cancel_previous"] | None = None
    max_active_runs: int | None = Field(default=None, ge=1, le=100_000)
    suspend_at: Instant | None = None
    suspend_after: Positive | None = None
    auto_resume: bool | None = None
    late_after: NotNegative | None = None
    webservice: WebServiceSettings | None = None

    def given(self) -> frozenset[str]:
        """The fields the request named (an explicit ``null`` included)."""
        return frozenset(self.model_fields_set)

    def apply(self, current: JobSpec) -> JobSpec:
        """The spec with this patch applied; raises pydantic's ``ValidationError``.

        A task of the new graph that does not mention ``secure_params`` keeps those of
        the task of the same name: they are write-only, so a client cannot send them
        back, and editing a task's params must not drop its secrets.
        """
        fields = current.model_dump(exclude={"tasks"})
        fields.update({name: getattr(self, name) for name in self.given()})
        fields["tasks"] = current.tasks if self.tasks is None else _keep_secrets(
            self.tasks, {task.name: task for task in current.tasks}
        )
        fields["webservice"] = self._webservice(current.webservice)
        return JobSpec.model_validate(fields)

    def _webservice(self, current: WebServiceSettings | None) -> WebServiceSettings | None:
        """Given settings replace the old whole, except write-only headers not mentioned."""
        if "webservice" not in self.given():
            return current
        new = self.webservice
        if new is None or "headers" in new.model_fields_set or current is None:
            return new
        return new.model_copy(update={"headers": current.headers})


def _keep_secrets(tasks: list[TaskSpec], old: dict[str, TaskSpec]) -> list[TaskSpec]:
    return [
        task.model_copy(update={"secure_params": old[task.name].secure_params})
        if "secure_params" not in task.model_fields_set and task.name in old else task
        for task in tasks
    ]
