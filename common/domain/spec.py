"""The job specification a user submits, and the rules a valid task graph obeys.

Pydantic does the field-level checks; :func:`check_graph` the graph rules
(docs/job-spec.md, "Task fields").
Every error names the task or field at fault, because the person reading a 422 has
only the message to go by.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from common.domain.builtin_params import check_params
from common.domain.flow_spec import ConcurrencySpec, FlowNeeds, RateSpec, TaskContext, needs
from common.domain.graph import Graph, GraphError
from common.domain.webservice import WebServiceSettings

TYPE_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
MAX_TASKS = 20_000
# Durations: a timeout must be positive, a delay may be zero, and none is longer than ten
# years, so that a date plus a duration always stays a date (past year 9999 the
# arithmetic fails, and did, as a 500). Dates are bounded for the same reason.
MAX_DURATION = timedelta(days=3650)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
# The bounds in the published schema (issue 14): years 1971 to 8998, so that any UTC
# offset keeps the instant inside them. The validator stays the rule (its message is
# clearer than "does not match pattern"); the pattern only tells clients.
INSTANT_YEARS = r"^(197[1-9]|19[89][0-9]|[2-7][0-9]{3}|8[0-8][0-9]{2}|89[0-8][0-9]|899[0-8])-"
# Published as seconds, as they are answered (``ser_json_timedelta``); an ISO 8601
# duration is read too. The bounds in the schema: a clock's millisecond is the least.
_SECONDS = "Seconds (an ISO 8601 duration such as PT1H is read too), at most ten years."
Positive = Annotated[timedelta, Field(gt=timedelta(0), le=MAX_DURATION), WithJsonSchema({
    "type": "number", "minimum": 0.001, "maximum": MAX_DURATION.total_seconds(),
    "description": _SECONDS})]
NotNegative = Annotated[timedelta, Field(ge=timedelta(0), le=MAX_DURATION), WithJsonSchema({
    "type": "number", "minimum": 0, "maximum": MAX_DURATION.total_seconds(),
    "description": _SECONDS})]
# No longer than the columns that hold them (a longer value was a 500 from the database).
ShortText = Annotated[str, Field(max_length=200)]


def _instant(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("a date must carry a UTC offset, e.g. 2027-01-01T10:00:00+01:00")
    if not EARLIEST <= value <= LATEST:
        raise ValueError(f"a date must lie between {EARLIEST.year} and {LATEST.year}")
    return value


def _known_zones(schema: dict[str, Any]) -> None:
    """The IANA names this machine knows, as the schema's ``enum`` (issue 14).

    Filled when the schema is generated, not at import: it reads the tz database.
    """
    schema["enum"] = sorted(available_timezones())


Instant = Annotated[
    datetime, AfterValidator(_instant), Field(json_schema_extra={"pattern": INSTANT_YEARS}),
]


class Strict(BaseModel):
    """Base of every spec model: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid", ser_json_timedelta="float")


class TaskSpec(Strict):
    """One task of a job's graph, as written by the user."""

    name: str = Field(min_length=1, max_length=200)
    type: str = Field(min_length=1, max_length=100,
                      json_schema_extra={"pattern": TYPE_PATTERN.pattern})
    params: dict[str, Any] = Field(default_factory=dict)
    secure_params: dict[str, Any] | None = None
    next: list[str] = Field(default_factory=list)
    timeout: Positive | None = None
    retries: int | None = Field(default=None, ge=0, le=100)
    retry_backoff: NotNegative | None = None
    confirm: bool = False
    # 9 goes first, 0 last (issue 16): the order in which held READY tasks start.
    priority: int | None = Field(default=None, ge=0, le=9)
    # Flow control (issue 16, ``common.domain.flow_spec``); None takes the job's default.
    concurrency: list[ConcurrencySpec] | None = Field(default=None, max_length=8)
    rate: RateSpec | None = None

    @field_validator("type")
    @classmethod
    def _type_is_identifier(cls, value: str) -> str:
        if not TYPE_PATTERN.match(value):
            raise ValueError(f"task type {value!r} is not an identifier (letters, digits, _ . -)")
        return value

    @model_validator(mode="after")
    def _params_fit_the_type(self) -> TaskSpec:
        """A built-in type's params are checked now, not when an attempt runs."""
        try:
            check_params(self.type, self.params)
        except ValueError as error:
            raise ValueError(f"task {self.name!r} ({self.type}): {error}") from None
        return self


class TaskDefaults(Strict):
    """Defaults applied to every task that does not set its own."""

    # The schema's defaults in seconds, as the durations are published (pydantic would
    # write them as ISO durations, which the number schema does not admit).
    timeout: Positive = Field(default=timedelta(hours=12), json_schema_extra={"default": 43200})
    retries: int = Field(default=0, ge=0, le=100)
    retry_backoff: NotNegative = Field(default=timedelta(seconds=1),
                                       json_schema_extra={"default": 1})
    concurrency: list[ConcurrencySpec] = Field(default_factory=list, max_length=8)
    rate: RateSpec | None = None


class Schedule(Strict):
    """When a job runs: empty means once, now; ``at`` a one-off date; ``cron`` repeats."""

    # ``_one_kind`` in the published schema (issue 14).
    model_config = ConfigDict(json_schema_extra={"not": {
        "required": ["at", "cron"],
        "properties": {"at": {"type": "string"}, "cron": {"type": "string"}},
    }})

    at: Instant | None = None
    cron: str | None = None
    timezone: str = Field(default="UTC", json_schema_extra=_known_zones)

    @model_validator(mode="after")
    def _one_kind(self) -> Schedule:
        if self.at is not None and self.cron is not None:
            raise ValueError("a schedule has either 'at' or 'cron', not both")
        return self


class JobSpec(Strict):
    """A job definition as accepted by ``POST /jobs`` and ``stellwerk submit``."""

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    application: ShortText = ""
    type: ShortText = ""
    tenant: ShortText = ""
    owner: ShortText = ""
    labels: dict[str, str] = Field(default_factory=dict)
    priority: int = Field(default=5, ge=0, le=9)
    params: dict[str, Any] = Field(default_factory=dict)
    secure_params: dict[str, Any] | None = None
    storage: dict[str, Any] = Field(default_factory=dict)
    tasks: list[TaskSpec] = Field(min_length=1, max_length=MAX_TASKS)
    schedule: Schedule = Field(default_factory=Schedule)
    canary: bool = False
    failure_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    timeout: Positive | None = None
    task_defaults: TaskDefaults = Field(default_factory=TaskDefaults)
    enabled: bool = True
    draft: bool = False
    catchup: Literal["none", "latest", "all"] = "none"
    catchup_window: NotNegative | None = None
    overlap: Literal["allow", "skip", "buffer_one", "cancel_previous"] = "allow"
    # At most this many runs of the job unfinished at once (issue 16); the rest wait READY.
    max_active_runs: int | None = Field(default=None, ge=1, le=100_000)
    suspend_at: Instant | None = None
    suspend_after: Positive | None = None
    auto_resume: bool = False
    late_after: NotNegative | None = None
    # Url and headers for this job's tasks of registered worker types (``worker_types``).
    webservice: WebServiceSettings | None = None

    @model_validator(mode="after")
    def _graph_is_valid(self) -> JobSpec:
        check_graph(self.tasks)
        return self

    @model_validator(mode="after")
    def _flow_keys_render(self) -> JobSpec:
        """Every concurrency and rate key names variables the task has (issue 16)."""
        for task in self.tasks:
            try:
                self.flow_needs(task)
            except ValueError as error:
                raise ValueError(f"task {task.name!r}: {error}") from None
        return self

    def flow_needs(self, task: TaskSpec) -> FlowNeeds:
        """The task's concurrency keys and rate, its own or the job's defaults, rendered."""
        context = TaskContext(job=self.name, tenant=self.tenant, type=task.type,
                              task=task.name, params=task.params, job_params=self.params)
        return needs(*self.flow_settings(task), context)

    def flow_settings(
        self, task: TaskSpec,
    ) -> tuple[list[ConcurrencySpec] | None, RateSpec | None]:
        """The task's concurrency and rate settings: its own, else the job's defaults."""
        defaults = self.task_defaults
        concurrency = defaults.concurrency if task.concurrency is None else task.concurrency
        return concurrency, task.rate or defaults.rate

    def graph(self) -> Graph:
        """Build the task graph of this spec."""
        return Graph.build((t.name, t.type, t.next) for t in self.tasks)


def check_graph(tasks: list[TaskSpec]) -> None:
    """Raise ``ValueError`` naming the offending task if the graph breaks a rule."""
    try:
        Graph.build((t.name, t.type, t.next) for t in tasks)
    except GraphError as error:
        raise ValueError(str(error)) from error
