"""The API's answers as :class:`stellwerk.client.Client` returns them.

A ``TypedDict`` where the shape is small and stable (a run, a limit, a token); a job or
a subscription, large and growing with each issue, stays ``dict[str, Any]``, with the
API's OpenAPI schema (``GET /api/v1/openapi.json``) as its description. Times are the
API's ISO 8601 strings, as the JSON has them.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class Change(TypedDict):
    """One difference between a job and a spec applied to it (secrets sealed)."""

    path: str
    before: NotRequired[Any]
    after: NotRequired[Any]


class Applied(TypedDict):
    """What ``PUT /jobs/{name}`` did, or would do in a dry run."""

    action: Literal["created", "updated", "unchanged"]
    dry_run: bool
    changes: list[Change]
    job: dict[str, Any] | None
    run_id: str | None


class Page(TypedDict):
    """One page of a list, newest first; pass ``next_cursor`` on to read the next."""

    data: list[dict[str, Any]]
    next_cursor: str | None


class RunSummary(TypedDict):
    """A run without its tasks (``GET /jobs/{id}/runs``, ``POST /jobs/{id}/runs``)."""

    id: str
    job_id: str
    number: int
    trigger: str
    state: str
    scheduled_for: str
    started_at: str | None
    finished_at: str | None
    progress: dict[str, int]


class Run(RunSummary):
    """A run with its tasks (``GET /runs/{id}``, and the answer to a run action)."""

    tasks: list[dict[str, Any]]


class LogLine(TypedDict):
    """One line a task wrote, in one attempt, on ``stdout`` or ``stderr``."""

    at: str
    attempt: int
    stream: str
    line: str


class Logs(TypedDict):
    """A task's log (``GET /runs/{id}/tasks/{task}/logs``), oldest line first."""

    lines: list[LogLine]


class FireTimes(TypedDict):
    """A cron job's next fire times after ``after`` (``GET /jobs/{id}/fire-times``)."""

    job_id: str
    cron: str | None
    timezone: str
    after: str
    fire_times: list[str]


class Limit(TypedDict):
    """A limited key (``type:render``): its limit, and how many hold or wait for it."""

    key: str
    limit: int | None
    per: float | None
    weight: int | None
    active: int
    waiting: int


class Limits(TypedDict):
    """Every key with a limit, a slot held or a waiter (``GET /limits``)."""

    data: list[Limit]


class Pruned(TypedDict):
    """What one ``POST /prune`` deleted; ``more``: call again for the rest."""

    cutoff: str
    keep_runs: int
    tenant: str | None
    runs: int
    fires: int
    more: bool


class Token(TypedDict):
    """An API token as listed: never its value, which the API does not keep."""

    id: str
    name: str
    scopes: list[str]
    tenant: str | None
    created_by: str
    created_at: str
    expires_at: str | None


class TokenCreated(Token):
    """A new token, with its value: the only time the API shows it."""

    token: str


class Tokens(TypedDict):
    """One page of the tokens you may see (``GET /tokens``)."""

    data: list[Token]
    next_cursor: str | None
