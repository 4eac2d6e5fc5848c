"""What a task asks of flow control: concurrency keys and a rate, as written and as keys.

A job says ``concurrency: [{key: "db-{params.region}", limit: 2}]`` and ``rate: {key:
"github", limit: 100, per: 60}`` on a task or in its ``task_defaults``. The keys are
rendered when the job is written (a job's params do not change between its runs), so
an unknown variable is a 422 at submit, and the engine reads finished keys.

Variables: ``{params.NAME}`` (the task's params, then the job's), ``{job}`` (the job's
name), ``{tenant}``, ``{type}`` (the task's type) and ``{task}`` (its name).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

MAX_KEY = 200
MAX_LIMIT = 1_000_000
VARIABLE = re.compile(r"\{([^{}]*)\}")
NAMES = ("job", "tenant", "type", "task")
# Keys by who sets their limit: a task's spec, a rate, or an operator (``stellwerk limit``).
KEY, RATE, TYPE, TENANT = "key:", "rate:", "type:", "tenant:"

KeyTemplate = Annotated[str, Field(min_length=1, max_length=MAX_KEY)]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT)]
LONGEST_WINDOW = timedelta(days=1)
# Published as seconds, as the other durations of a job (``common.domain.spec``).
Window = Annotated[timedelta, Field(gt=timedelta(0), le=LONGEST_WINDOW), WithJsonSchema({
    "type": "number", "minimum": 0.001, "maximum": LONGEST_WINDOW.total_seconds(),
    "description": "Seconds (an ISO 8601 duration such as PT1M is read too), at most a day."})]


class ConcurrencySpec(BaseModel):
    """At most ``limit`` attempts holding ``key`` at once, across every run and job."""

    model_config = ConfigDict(extra="forbid")

    key: KeyTemplate
    limit: Limit


class RateSpec(BaseModel):
    """At most ``limit`` starts of attempts holding ``key`` in any ``per`` window."""

    model_config = ConfigDict(extra="forbid", ser_json_timedelta="float")

    key: KeyTemplate
    limit: Limit
    per: Window


@dataclass(frozen=True)
class TaskContext:
    """What a key's variables are read from."""

    job: str
    tenant: str
    type: str
    task: str
    params: Mapping[str, Any]
    job_params: Mapping[str, Any]


@dataclass(frozen=True)
class FlowNeeds:
    """The rendered keys of one task: ``(key, limit)`` pairs and the rate, if any."""

    concurrency: tuple[tuple[str, int], ...] = ()
    rate: tuple[str, int, float] | None = None

    @property
    def asks(self) -> bool:
        """Whether the task states a concurrency key or a rate."""
        return bool(self.concurrency) or self.rate is not None

    def to_json(self) -> dict[str, Any] | None:
        """As stored in ``tasks.flow`` (None when the task asks for nothing)."""
        if not self.asks:
            return None
        return {"concurrency": [list(pair) for pair in self.concurrency],
                "rate": None if self.rate is None else list(self.rate)}

    @staticmethod
    def from_json(data: Mapping[str, Any] | None) -> FlowNeeds:
        """Read back what :meth:`to_json` stored."""
        if not data:
            return FlowNeeds()
        rate = data.get("rate")
        return FlowNeeds(
            tuple((str(key), int(limit)) for key, limit in data.get("concurrency") or ()),
            None if rate is None else (str(rate[0]), int(rate[1]), float(rate[2])),
        )


def has_variables(template: str) -> bool:
    """Whether ``template`` names a variable: rendered alike for every task if not."""
    return VARIABLE.search(template) is not None


def render(template: str, context: TaskContext) -> str:
    """The key ``template`` names for this task; ``ValueError`` names what is wrong."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        if name in NAMES:
            return str(getattr(context, name))
        if name.startswith("params."):
            return _param(name, context)
        known = ", ".join(f"{{{n}}}" for n in (*NAMES, "params.NAME"))
        raise ValueError(f"unknown variable {{{name}}} in key {template!r} (known: {known})")

    key = VARIABLE.sub(value, template)
    if len(key) > MAX_KEY:
        raise ValueError(f"key {template!r} renders to {len(key)} characters, over {MAX_KEY}")
    return key


def _param(name: str, context: TaskContext) -> str:
    param = name.removeprefix("params.")
    for params in (context.params, context.job_params):
        if param in params:
            found = params[param]
            if isinstance(found, dict | list):
                raise ValueError(f"{{{name}}} is not a single value")
            return str(found)
    raise ValueError(f"unknown variable {{{name}}}: neither the task nor the job has "
                     f"a param {param!r}")


def needs(
    concurrency: list[ConcurrencySpec] | None, rate: RateSpec | None, context: TaskContext,
) -> FlowNeeds:
    """Render a task's flow settings into keys."""
    pairs = tuple((KEY + render(c.key, context), c.limit) for c in concurrency or ())
    if rate is None:
        return FlowNeeds(pairs)
    return FlowNeeds(pairs, (RATE + render(rate.key, context), rate.limit,
                             rate.per.total_seconds()))
