"""A typed client of the REST API (issue 17): every ``stellwerk`` client command uses it.

    from stellwerk.client import Client

    with Client("http://127.0.0.1:8080", token) as api:
        applied = api.apply(spec)                 # PUT /jobs/{name}
        run = api.run_now("nightly")              # POST /jobs/{name}/runs
        print(api.run(run["id"])["state"])

Each method names the route it calls and answers the API's JSON, as a ``TypedDict``
(:mod:`stellwerk.answers`) where its shape is small and stable. Every error is a
:class:`ClientError` (:mod:`stellwerk.errors`): an error answer raises :class:`ApiError`
(``404 run … not found``), no answer :class:`Unreachable`, an answer that is no JSON
object :class:`UnexpectedAnswer`, and a stream that breaks off :class:`StreamBroken`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self, cast
from urllib.parse import quote, urlencode

import httpx

from stellwerk.answers import (
    Applied,
    Change,
    FireTimes,
    Limit,
    Limits,
    LogLine,
    Logs,
    Page,
    Pruned,
    Run,
    RunSummary,
    Token,
    TokenCreated,
    Tokens,
)
from stellwerk.errors import (
    ApiError,
    ClientError,
    StreamBroken,
    UnexpectedAnswer,
    Unreachable,
)

__all__ = [
    "ApiError", "Applied", "Change", "Client", "ClientError", "FireTimes", "Limit", "Limits",
    "LogLine", "Logs", "Page", "Pruned", "Run", "RunAction", "RunSummary", "StreamBroken",
    "Token", "TokenCreated", "Tokens", "UnexpectedAnswer", "Unreachable",
]

API_PREFIX = "/api/v1"
RunAction = Literal["cancel", "pause", "resume", "retry", "confirm", "reject", "skip"]
Query = Sequence[tuple[str, str | int]]


class Client:
    """The REST API at ``api_url`` (``.../api/v1`` added when missing), as ``token``.

    ``api_url`` may be the server's root or the API's base URL already resolved: both
    lead to the same routes. A client may be used from two threads (``stellwerk watch``
    reads the event stream on one while it reads the run on the other), as httpx allows.
    ``transport`` replaces the network, e.g. by an ``httpx.MockTransport`` in tests.
    """

    def __init__(self, api_url: str, token: str | None = None, *, timeout_s: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        root = api_url.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=root if root.endswith(API_PREFIX) else root + API_PREFIX,
            headers=headers, timeout=timeout_s, transport=transport)

    @property
    def base_url(self) -> str:
        """The URL the routes are relative to, e.g. ``http://127.0.0.1:8080/api/v1/``."""
        return str(self._http.base_url)

    # -- jobs

    def jobs(self, *, limit: int = 50, job_type: str | None = None,
             labels: Iterable[str] = ()) -> Page:
        """``GET /jobs``: the newest jobs, of ``job_type`` and with every ``key=value`` label."""
        query: list[tuple[str, str | int]] = [("limit", limit)]
        query += [("type", job_type)] if job_type else []
        query += [("label", label) for label in labels]
        return cast(Page, self._call("GET", _with_query("/jobs", query)))

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs``: a new job from a spec; its ``run_id`` if it runs at once."""
        return self._call("POST", "/jobs", spec)

    def apply(self, spec: dict[str, Any], *, dry_run: bool = False) -> Applied:
        """``PUT /jobs/{name}``: create the job of the spec's name, or change what differs."""
        query = "?dry_run=true" if dry_run else ""
        return cast(Applied, self._call("PUT", f"/jobs/{_part(spec['name'])}{query}", spec))

    def job(self, job: str) -> dict[str, Any]:
        """``GET /jobs/{id or name}``."""
        return self._call("GET", _job_path(job))

    def patch_job(self, job: str, changes: dict[str, Any]) -> dict[str, Any]:
        """``PATCH /jobs/{id or name}``: change some settings, e.g. ``{"enabled": False}``."""
        return self._call("PATCH", _job_path(job), changes)

    def commit(self, job: str) -> dict[str, Any]:
        """``POST /jobs/{id or name}/commit``: a draft goes live; its ``run_id`` if one starts."""
        return self._call("POST", f"{_job_path(job)}/commit")

    def delete_job(self, job: str, *, force: bool = False) -> None:
        """``DELETE /jobs/{id or name}``: with its runs; ``force`` cancels unfinished ones."""
        self._call("DELETE", _job_path(job) + ("?force=true" if force else ""))

    def run_now(self, job: str) -> RunSummary:
        """``POST /jobs/{id or name}/runs``: a new run, now."""
        return cast(RunSummary, self._call("POST", f"{_job_path(job)}/runs"))

    def runs(self, job: str, *, limit: int = 20) -> Page:
        """``GET /jobs/{id or name}/runs``: the job's newest runs, without their tasks."""
        return cast(Page, self._call("GET", _with_query(f"{_job_path(job)}/runs",
                                                        [("limit", limit)])))

    def fire_times(self, job: str, *, count: int = 10, after: str | None = None) -> FireTimes:
        """``GET /jobs/{id or name}/fire-times``: the next ``count``, after ``after`` (ISO 8601)."""
        query: list[tuple[str, str | int]] = [("count", count)]
        query += [("after", after)] if after else []
        path = _with_query(f"{_job_path(job)}/fire-times", query)
        return cast(FireTimes, self._call("GET", path))

    # -- runs

    def run(self, run_id: str) -> Run:
        """``GET /runs/{id}``: the run with its tasks."""
        return cast(Run, self._call("GET", f"/runs/{_part(run_id)}"))

    def act(self, run_id: str, action: RunAction, *, task: str | None = None) -> Run:
        """``POST /runs/{id}/{action}``, or ``/runs/{id}/tasks/{task}/{action}`` for one task.

        Answers the run after the action; a refusal is a 409 naming the run's state.
        """
        path = f"/runs/{_part(run_id)}" + (f"/tasks/{_part(task)}" if task is not None else "")
        return cast(Run, self._call("POST", f"{path}/{action}"))

    def logs(self, run_id: str, task: str, *, attempt: int | None = None) -> Logs:
        """``GET /runs/{id}/tasks/{task}/logs``: what the task (name or id) wrote so far."""
        query = [("attempt", attempt)] if attempt is not None else []
        return cast(Logs, self._call("GET", _with_query(_logs_path(run_id, task), query)))

    def follow_logs(self, run_id: str, task: str, *, attempt: int | None = None) -> Iterator[str]:
        """``GET /runs/{id}/tasks/{task}/logs?follow=true`` (text/plain): the log as written.

        Yields the text as it comes, until the task is done; the request is sent at the
        first ``next``. It has no read timeout: a quiet task sends nothing for long.
        """
        query: list[tuple[str, str | int]] = [("follow", "true")]
        query += [("attempt", attempt)] if attempt is not None else []
        path = _with_query(_logs_path(run_id, task), query)
        with self._stream("log", path, "text/plain", None) as response:
            yield from response.iter_text()

    def processors(self) -> dict[str, Any]:
        """``GET /processors``: each task type, whether a live worker serves it, who."""
        return self._call("GET", "/processors")

    @contextmanager
    def events(self, *, run_id: str | None = None, job_id: str | None = None,
               history: bool = True,
               timeout_s: float | None = None) -> Iterator[Iterator[dict[str, Any]]]:
        """``GET /events`` (Server-Sent Events): each state change, decoded, as it happens.

        The stream is open once the ``with`` is entered, so what happens after that is
        not missed; iterate what it gives for the events. One run's stream (``run_id``)
        replays the run's events so far (unless ``history`` is False) and ends after its
        last; the others end when closed. ``timeout_s`` bounds each read (None: none);
        the API sends a keep-alive every 15 s.
        """
        query = [(name, value) for name, value in (
            ("run_id", run_id), ("job_id", job_id), ("history", "" if history else "false"))
            if value]
        path = _with_query("/events", query)
        with self._stream("event", path, "text/event-stream", timeout_s) as response:
            yield _events(response.iter_lines())

    # -- operators: limits, retention, subscriptions, tokens

    def limits(self) -> Limits:
        """``GET /limits``: every limited key with what holds or waits for it."""
        return cast(Limits, self._call("GET", "/limits"))

    def set_limit(self, key: str, limit: int | None, *, per: float | None = None,
                  weight: int | None = None) -> Limit:
        """``PUT /limits/{key}``: a concurrency limit, a rate (``per`` s) or a tenant's weight."""
        body = {"limit": limit, "per": per, "weight": weight}
        return cast(Limit, self._call("PUT", _limit_path(key), body))

    def delete_limit(self, key: str) -> None:
        """``DELETE /limits/{key}``: the key is no longer limited."""
        self._call("DELETE", _limit_path(key))

    def prune(self, older_than: timedelta, *, keep_runs: int | None = None,
              tenant: str | None = None) -> Pruned:
        """``POST /prune``: delete a few batches of runs finished before ``older_than`` ago.

        ``more`` in the answer says that some are left: call again until it is false.
        """
        body = {"older_than_s": older_than.total_seconds(), "keep_runs": keep_runs,
                "tenant": tenant}
        return cast(Pruned, self._call("POST", "/prune", body))

    def subscriptions(self, *, limit: int = 500) -> Page:
        """``GET /subscriptions``: those you may see (webhook secrets never shown)."""
        return cast(Page, self._call("GET", _with_query("/subscriptions", [("limit", limit)])))

    def create_subscription(self, events: list[str], selector: dict[str, Any],
                            target: dict[str, Any]) -> dict[str, Any]:
        """``POST /subscriptions``: send the ``events`` of the selected jobs to ``target``."""
        body = {"events": events, "selector": selector, "target": target}
        return self._call("POST", "/subscriptions", body)

    def delete_subscription(self, subscription_id: str) -> None:
        """``DELETE /subscriptions/{id}``: no more deliveries."""
        self._call("DELETE", f"/subscriptions/{_part(subscription_id)}")

    def create_token(self, name: str, scopes: list[str], *, tenant: str | None = None,
                     expires_at: datetime | None = None) -> TokenCreated:
        """``POST /tokens``: a new token; its value is in this answer only."""
        body: dict[str, Any] = {"name": name, "scopes": scopes, "tenant": tenant}
        if expires_at is not None:
            body["expires_at"] = expires_at.isoformat()
        return cast(TokenCreated, self._call("POST", "/tokens", body))

    def tokens(self, *, limit: int = 500) -> Tokens:
        """``GET /tokens``: the tokens you may see, without their values."""
        return cast(Tokens, self._call("GET", _with_query("/tokens", [("limit", limit)])))

    def revoke_token(self, token_id: str) -> None:
        """``DELETE /tokens/{id}``: refused from the next request on."""
        self._call("DELETE", f"/tokens/{_part(token_id)}")

    # -- the wire

    def _call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        """Send one request; the JSON object answered, ``{}`` for a 204 (e.g. a DELETE)."""
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as error:
            raise Unreachable(self.base_url, str(error)) from error
        if response.is_error:
            raise ApiError.of(response)
        if response.status_code == 204:
            return {}
        return _json_object(response.text, f"{method} {path}")

    @contextmanager
    def _stream(self, what: str, path: str, accept: str,
                timeout_s: float | None) -> Iterator[httpx.Response]:
        """``GET path`` as a stream, opened: the caller reads it in its ``with``.

        No answer raises :class:`Unreachable` and an error answer :class:`ApiError`, as
        for any call; a failure while the caller reads is :class:`StreamBroken`.
        """
        try:
            with self._http.stream("GET", path, headers={"Accept": accept},
                                   timeout=timeout_s) as response:
                if response.is_error:
                    response.read()
                    raise ApiError.of(response)
                try:
                    yield response
                except httpx.HTTPError as error:
                    raise StreamBroken(what, self.base_url, str(error)) from error
        except httpx.HTTPError as error:
            raise Unreachable(self.base_url, str(error)) from error

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _part(value: str, safe: str = "") -> str:
    """One path segment: a name with ``/`` or spaces is still one segment."""
    return quote(value, safe=safe)


def _job_path(job: str) -> str:
    return f"/jobs/{_part(job)}"


def _logs_path(run_id: str, task: str) -> str:
    return f"/runs/{_part(run_id)}/tasks/{_part(task)}/logs"


def _limit_path(key: str) -> str:
    """``/limits/type:render``: the colon kept, as the route documents its keys."""
    return f"/limits/{_part(key, safe=':')}"


def _with_query(path: str, query: Query) -> str:
    return f"{path}?{urlencode(query)}" if query else path


def _json_object(text: str, what: str) -> dict[str, Any]:
    """The JSON object ``text`` is, or :class:`UnexpectedAnswer` naming ``what`` said it."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UnexpectedAnswer(f"unexpected answer from {what}: {text[:200]!r}")
    return data


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Each event's data, decoded; comments (the keep-alives) and ids are no events."""
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield _json_object("\n".join(data), "GET /events")
            data = []
