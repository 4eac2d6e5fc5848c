"""Worker types: task types registered by name, served by a web service.

The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".

A worker type names an engine (``webservice``, or ``http`` for one plain call), a URL,
HTTP headers and a job template. A job task whose ``type`` is a registered name is
*bound* when the job is written (create, or a PATCH of its tasks): :func:`bind` works
out what its dispatches carry, so the engine needs no lookup and never a secret. The
task keeps its registered type (task runs show it); only the dispatch goes to the
engine's queue (``tasks.webservice``) as a ``webservice`` attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator

from common.domain.spec import TYPE_PATTERN, NotNegative, Positive, Strict, TaskDefaults, TaskSpec
from common.domain.webservice import (
    Headers,
    HttpUrl,
    WebServiceSettings,
    overlay_headers,
)


def dispatched_as(task_type: str, binding: Mapping[str, Any] | None) -> str:
    """The type a task's attempts are dispatched as: its binding's engine, else its own.

    The engine sends the attempt to that type's queue; whoever serves that type serves
    the task (``scheduler.services.serving`` says when nobody does).
    """
    engine = (binding or {}).get("engine")
    return engine if isinstance(engine, str) and engine else task_type


# Task types whose processors ship with Stellwerk: a worker type may not shadow them.
BUILTIN_TYPES = frozenset({"noop", "sleep", "python", "shell", "http", "webservice",
                           "kubernetes"})
Engine = Literal["webservice", "http"]
# Set on the worker type or per job, never in a template's params.
_CALL_KEYS = frozenset({"url", "headers"})
_HEADERS: TypeAdapter[dict[str, str]] = TypeAdapter(Headers)


class WorkerTemplate(Strict):
    """Defaults for the tasks of one worker type.

    A task's own settings win, then these, then the job's ``task_defaults``; ``params``
    are laid under the task's params (a task's key wins).
    """

    params: dict[str, Any] = Field(default_factory=dict)
    timeout: Positive | None = None
    retries: int | None = Field(default=None, ge=0, le=100)
    retry_backoff: NotNegative | None = None

    @field_validator("params")
    @classmethod
    def _no_call_settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(_CALL_KEYS & set(value))
        if clash:
            raise ValueError(f"{', '.join(clash)}: set on the worker type itself, not in "
                             "its template")
        return value


class WorkerTypeSpec(Strict):
    """A worker type as ``POST /worker-types`` accepts it."""

    name: str = Field(min_length=1, max_length=100, json_schema_extra={
        "pattern": TYPE_PATTERN.pattern, "not": {"enum": [*sorted(BUILTIN_TYPES)]},
    })
    engine: Engine = "webservice"
    url: HttpUrl
    headers: Headers = Field(default_factory=dict, description="Write-only: stored sealed, "
                             "only the names are shown.")
    job_template: WorkerTemplate = Field(default_factory=WorkerTemplate)

    @field_validator("name")
    @classmethod
    def _name_is_free_identifier(cls, value: str) -> str:
        if not TYPE_PATTERN.match(value):
            raise ValueError(f"{value!r} is not a task type (letters, digits, _ . -)")
        if value in BUILTIN_TYPES:
            raise ValueError(f"{value!r} is a built-in task type")
        return value


@dataclass(frozen=True)
class RegisteredType:
    """A stored worker type, its headers opened: what binding a task needs."""

    name: str
    engine: Engine
    url: str
    headers: dict[str, str]
    template: WorkerTemplate


@dataclass(frozen=True)
class Binding:
    """How one task of a registered type is dispatched (secure params still open)."""

    worker_type: str
    engine: Engine
    params: dict[str, Any]
    secure_params: dict[str, Any] | None
    defaults: TaskDefaults


def bind(
    task: TaskSpec, registered: RegisteredType, job: WebServiceSettings | None,
    defaults: TaskDefaults,
) -> Binding:
    """The dispatch of ``task``; ``ValueError`` if its ``secure_params.headers`` are bad.

    ``params.url`` is the task's own, else the job's ``webservice.url``, else the type's.
    The headers (the type's, overlaid by the job's, overlaid by the task's own
    ``secure_params.headers``) travel sealed as ``secure_params.headers``, never in
    plain params.
    """
    settings = job or WebServiceSettings()
    template = registered.template
    params = {**template.params, "url": settings.url or registered.url, **task.params}
    secure = dict(task.secure_params or {})
    headers = overlay_headers(registered.headers, settings.headers)
    if "headers" in secure:
        headers = overlay_headers(headers, _task_headers(secure["headers"]))
    if headers:
        secure["headers"] = headers
    return Binding(
        worker_type=registered.name, engine=registered.engine, params=params,
        secure_params=secure or None, defaults=_defaults(template, defaults),
    )


def _task_headers(value: Any) -> dict[str, str]:
    try:
        return _HEADERS.validate_python(value)
    except ValidationError as error:
        reason = error.errors()[0]["msg"].removeprefix("Value error, ")
        raise ValueError(f"headers: {reason}") from error


def _defaults(template: WorkerTemplate, defaults: TaskDefaults) -> TaskDefaults:
    return TaskDefaults(
        timeout=template.timeout or defaults.timeout,
        retries=defaults.retries if template.retries is None else template.retries,
        retry_backoff=(
            defaults.retry_backoff if template.retry_backoff is None else template.retry_backoff
        ),
    )
