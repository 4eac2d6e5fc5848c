"""A typed client of the REST API (issue 17), used by ``stellwerk apply`` and by scripts.

    from stellwerk.client import Client

    with Client("http://127.0.0.1:8080", token) as api:
        applied = api.apply(spec)                 # PUT /jobs/{name}
        run = api.run_now("nightly")              # POST /jobs/{name}/runs
        print(api.run(run["id"])["state"])

Each method names the route it calls and answers the API's JSON as the ``TypedDict``
its schema describes; an error answer raises :class:`ApiError` with the status and the
problem's ``detail``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal, NotRequired, Self, TypedDict, cast
from urllib.parse import quote

import httpx

API_PREFIX = "/api/v1"


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
    """A run with its tasks (``GET /runs/{id}``)."""

    tasks: list[dict[str, Any]]


class ApiError(Exception):
    """An error answer: its status and the problem's ``detail`` (or the status line)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status} {detail}")
        self.status = status
        self.detail = detail


class Client:
    """The REST API at ``api_url`` (``.../api/v1`` added when missing), as ``token``."""

    def __init__(self, api_url: str, token: str | None = None, *,
                 timeout_s: float = 30.0) -> None:
        root = api_url.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=root if root.endswith(API_PREFIX) else root + API_PREFIX,
            headers=headers, timeout=timeout_s)

    def apply(self, spec: dict[str, Any], *, dry_run: bool = False) -> Applied:
        """``PUT /jobs/{name}``: create the job of the spec's name, or change what differs."""
        query = "?dry_run=true" if dry_run else ""
        return cast(Applied, self._call("PUT", f"/jobs/{_part(spec['name'])}{query}", spec))

    def job(self, job: str) -> dict[str, Any]:
        """``GET /jobs/{id or name}``."""
        return self._call("GET", f"/jobs/{_part(job)}")

    def run_now(self, job: str) -> RunSummary:
        """``POST /jobs/{id or name}/runs``: a new run, now."""
        return cast(RunSummary, self._call("POST", f"/jobs/{_part(job)}/runs"))

    def run(self, run_id: str) -> Run:
        """``GET /runs/{id}``: the run with its tasks."""
        return cast(Run, self._call("GET", f"/runs/{_part(run_id)}"))

    def _call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        response = self._http.request(method, path, json=body)
        if response.is_error:
            raise ApiError(response.status_code, _detail(response))
        return {} if response.status_code == 204 else cast(dict[str, Any], response.json())

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _part(value: str) -> str:
    return quote(value, safe="")


def _detail(response: httpx.Response) -> str:
    try:
        problem = response.json()
    except ValueError:
        return response.reason_phrase
    detail = problem.get("detail") if isinstance(problem, dict) else None
    if isinstance(detail, list):
        return "; ".join(str(item.get("msg", item)) if isinstance(item, dict) else str(item)
                         for item in detail)
    return str(detail or response.reason_phrase)
