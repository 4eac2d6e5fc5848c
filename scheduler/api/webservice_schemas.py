"""Bodies of worker types, post-backs and web-service callbacks.

The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".

Header values are write-only: a worker type (and a job's ``webservice`` settings) is
shown with the names of its headers only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from common.domain.spec import Strict
from common.domain.webservice import ReportedState, outcome_of_status
from common.domain.worker_types import Engine, WorkerTemplate, WorkerTypeSpec
from common.persistence.models import WorkerType
from scheduler.api.schemas import Public
from scheduler.engine.reported import Report

MAX_MESSAGE_CHARS = 64 * 1024


class WorkerTypeCreate(WorkerTypeSpec):
    """A worker type, as ``POST /worker-types`` accepts it.

    ``job_template`` may hold ``params`` (laid under each task's params; not ``url`` or
    ``headers``), ``timeout``, ``retries`` and ``retry_backoff`` (used where a task sets
    none, before the job's ``task_defaults``).
    """


class WorkerTypePublic(Public):
    """A registered worker type; ``headers`` lists the names of its headers only."""

    name: str
    engine: Engine
    url: str
    headers: list[str]
    job_template: WorkerTemplate
    created_by: str
    created_at: datetime

    @classmethod
    def of(cls, row: WorkerType) -> WorkerTypePublic:
        """From a stored row; the sealed header values stay where they are."""
        return cls(
            name=row.name, engine="http" if row.engine == "http" else "webservice",
            url=row.url, headers=sorted(row.header_names),
            job_template=WorkerTemplate.model_validate(row.job_template),
            created_by=row.created_by, created_at=row.created_at,
        )


class WorkerTypesPublic(Public):
    """Every registered worker type, by name."""

    data: list[WorkerTypePublic]


class OutcomePostBack(Strict):
    """``PUT /runs/{id}/tasks/{task}/outcome``: an outcome, or the status of an HTTP call.

    Either ``state`` (with ``output`` and ``message``) or ``status`` alone: 2xx is
    COMPLETED, 401/403/409 REJECTED, any other FAILED (the status becomes the output).
    """

    # The one-form rule of ``_one_form``, as the published schema states it (issue 14).
    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"required": ["state"], "properties": {"state": {"type": "string"}},
         "not": {"required": ["status"]}},
        {"required": ["status"], "properties": {"status": {"type": "integer"}},
         "not": {"anyOf": [{"required": [k]} for k in ("state", "output", "message")]}},
    ]})

    state: ReportedState | None = None
    status: int | None = Field(default=None, ge=100, le=599)
    output: dict[str, Any] | None = None
    message: str = Field(default="", max_length=MAX_MESSAGE_CHARS)
    attempt: int | None = Field(
        default=None, ge=0,
        description="The attempt reported on (default: the current one). Send it: a late "
        "report is then refused (409) rather than applied to a later attempt.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> OutcomePostBack:
        if (self.state is None) == (self.status is None):
            raise ValueError("give either 'state' or 'status'")
        if self.status is not None and {"output", "message"} & self.model_fields_set:
            raise ValueError("'output' and 'message' go with 'state'; 'status' stands alone")
        return self

    def report(self) -> Report:
        """The report this body makes."""
        if self.status is None:
            return Report("finished", self.attempt, self.state, self.output, self.message)
        outcome = outcome_of_status(self.status)
        message = "" if outcome == "COMPLETED" else f"reported HTTP status {self.status}"
        return Report("finished", self.attempt, outcome, {"status": self.status}, message)


class StatusCallback(Strict):
    """The ``status`` callback of a web-service worker: the attempt is done."""

    state: Literal["COMPLETED", "FAILED"]
    message: str = Field(default="", max_length=MAX_MESSAGE_CHARS)
    output: dict[str, Any] | None = None


class LogLineIn(Strict):
    """One line of a JSON ``log`` callback."""

    line: str
    stream: Literal["stdout", "stderr", "log"] = "log"

