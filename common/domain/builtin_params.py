"""The params of the built-in task types: one model each, checked at submit and at run time.

A job whose ``sleep`` task says ``seconds: "abc"`` or whose ``shell`` task gives
``argv`` as a string used to be accepted and fail when its attempt ran, minutes or
months later. The worker's processors and the API read the same models from here, so a
task accepted at submit is one its processor accepts (and no stricter: params a
processor ignores are ignored here too, so no job valid yesterday is refused today).

A refusal names the param and never repeats its value: params may hold things that
should not be echoed back.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

from common.domain.http_call import HttpCall

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# No longer than a task's timeout may be (common.domain.spec.MAX_DURATION).
MAX_SLEEP_S = 3650 * 24 * 3600.0


def _number(value: object) -> object:
    """A JSON number only: ``"2"`` and ``true`` are not seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    return value


Seconds = Annotated[
    float, BeforeValidator(_number), Field(ge=0, le=MAX_SLEEP_S, allow_inf_nan=False)
]


class SleepParams(BaseModel):
    """The params of a ``sleep`` task."""

    model_config = ConfigDict(extra="ignore")

    seconds: Seconds = 0


class ShellParams(BaseModel):
    """The params of a ``shell`` task: an argv list, never a shell string."""

    model_config = ConfigDict(extra="ignore")

    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


# The pydantic mypy plugin gives the generated ``__init__`` a ``**kwargs`` beside the
# ``kwargs`` param (extra params are ignored), which mypy takes for a redefinition.
class PythonParams(BaseModel):  # type: ignore[no-redef]
    """The params of a ``python`` task: a registered function's name and its kwargs."""

    model_config = ConfigDict(extra="ignore")

    function: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)


def _quantity(value: object) -> object:
    """``1`` → ``"1"``: the API takes quantities as strings; YAML often gives numbers."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    return value


Quantity = Annotated[str, BeforeValidator(_quantity), Field(min_length=1)]


class PodResources(BaseModel):
    """Container resources: ``{"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}``."""

    model_config = ConfigDict(extra="forbid")

    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class PodParams(BaseModel):
    """The params of a ``kubernetes`` task."""

    model_config = ConfigDict(extra="ignore")

    image: str = Field(min_length=1)
    # The container's entrypoint as an argv list; the image's own when left out.
    command: list[str] | None = Field(default=None, min_length=1)
    namespace: str | None = Field(default=None, pattern=DNS_LABEL)
    env: dict[str, str] = Field(default_factory=dict)
    resources: PodResources = Field(default_factory=PodResources)


PARAMS_OF: dict[str, type[BaseModel]] = {
    "http": HttpCall,
    "sleep": SleepParams,
    "shell": ShellParams,
    "python": PythonParams,
    "kubernetes": PodParams,
}
"""The built-in types whose params have a shape (``noop`` takes anything).

``webservice`` is not here: its ``url`` may come from the job's ``webservice`` settings
or a registered worker type, so its params alone do not say whether it is complete.
"""


def check_params(task_type: str, params: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming each param at fault if ``params`` do not fit the type."""
    model = PARAMS_OF.get(task_type)
    if model is None:
        return
    try:
        model.model_validate(params)
    except ValidationError as error:
        raise ValueError(describe(error)) from None


def describe(error: ValidationError, prefix: str = "params") -> str:
    """``params.seconds: Input should be ...; ...`` for every fault, without the values.

    The connector words its refusals of ``http`` params and ``/invoke`` bodies with it
    too (``connectors.params``), so a param is named alike at submit and at run time.
    """
    faults = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in (prefix, *item["loc"]))
        faults.append(f"{where}: {fault_text(item['msg'])}")
    return "; ".join(faults)


def fault_text(message: str) -> str:
    """A pydantic message without the ``Value error, `` its validators' messages get."""
    return message.removeprefix("Value error, ")
