"""``POST /runs/{id}/tasks/{task_run_id}/callbacks/log|storage|status``.

The rules: docs/decisions.md, "Post-backs, web-service callbacks, worker types".

A web-service worker calls these with the URLs the connector handed it; the ``token``
in the query is the credential (``common.callbacks``: an HMAC of the task run and
attempt), so they take no bearer token and sit outside the authenticated router. A
token that does not verify is 403 before anything is read. Each callback is a detached
report of the attempt: it renews the attempt's deadline (its timeout from now), and
``status`` ends it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from email.message import Message
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import TypeAdapter, ValidationError

from common.callbacks import verify_callback_token
from common.messaging.messages import LogLine
from scheduler.api.deps import NowDep, ResourcesDep, require_json
from scheduler.api.errors import PROBLEM_JSON
from scheduler.api.limits import LimitsDep
from scheduler.api.payload import refuse_unstorable
from scheduler.api.schemas import Problem
from scheduler.api.webservice_schemas import LogLineIn, StatusCallback
from scheduler.engine.reported import Report
from scheduler.services.errors import Forbidden, InvalidInput

REPORTER = "web-service callback"
MAX_LOG_LINES = 10_000
MAX_LINE_CHARS = 8 * 1024  # as a worker's log (``workers.tasklog``)
_LOG_JSON: TypeAdapter[LogLineIn | list[str | LogLineIn]] = TypeAdapter(
    LogLineIn | list[str | LogLineIn]
)
_PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": description, "content": {PROBLEM_JSON: {}}}
    for status, description in [
        (400, "The body is not well-formed JSON."),
        (403, "`token` is not the credential of this task run's `attempt`."),
        (404, "The run, or the task run in it, does not exist."),
        (409, "The attempt is not current, or the task has finished. Nothing was changed."),
        (413, "The body exceeds `STELLWERK_API_MAX_BODY_BYTES`."),
        (415, "A JSON callback got a body not declared application/json."),
        (422, "The request breaks a rule; `errors` says where."),
    ]
}
router = APIRouter(
    prefix="/runs/{run_id}/tasks/{task_run_id}/callbacks", tags=["callbacks"],
    dependencies=[Depends(refuse_unstorable)], responses=_PROBLEMS,
)


def verified_attempt(
    task_run_id: UUID, resources: ResourcesDep,
    attempt: Annotated[int, Query(ge=0, le=2**31 - 1, description="The attempt called back.")],
    token: Annotated[str, Query(min_length=1, max_length=200,
                                description="The credential in the callback URL.")],
) -> int:
    """The attempt, once ``token`` is verified as its credential; else 403."""
    key = resources.callback_key
    if key is None:
        raise Forbidden("this API has no STELLWERK_SECRET_KEY: it cannot verify callback tokens")
    if not verify_callback_token(key, task_run_id, attempt, token):
        raise Forbidden(f"the token is not the callback credential of task run {task_run_id} "
                        f"attempt {attempt}")
    return attempt


Attempt = Annotated[int, Depends(verified_attempt)]


@dataclass(frozen=True)
class RawBody:
    """A body as sent, with its declared media type."""

    data: bytes
    media_type: str


async def raw_body(request: Request) -> RawBody:
    """The body (buffered by the size limit already) and its media type."""
    message = Message()
    message["content-type"] = request.headers.get("content-type", "")
    return RawBody(await request.body(), message.get_content_type())


def _reported(run_id: UUID, task_run_id: UUID, resources: ResourcesDep, report: Report) -> Response:
    resources.reports.apply(run_id, str(task_run_id), report, REPORTER)
    return Response(status_code=204)


_LINE_SCHEMA = {
    "type": "object", "required": ["line"], "additionalProperties": False,
    "properties": {"line": {"type": "string"},
                   "stream": {"enum": ["stdout", "stderr", "log"], "default": "log"}},
}
_LOG_BODY = {"requestBody": {"required": False, "content": {
    "text/plain": {"schema": {"type": "string"}},
    "application/json": {"schema": {"anyOf": [
        _LINE_SCHEMA, {"type": "array", "items": {"anyOf": [{"type": "string"}, _LINE_SCHEMA]}},
    ]}},
}}}


@router.post("/log", status_code=204, response_class=Response, openapi_extra=_LOG_BODY)
def log(
    run_id: UUID, task_run_id: UUID, attempt: Attempt, resources: ResourcesDep, *,
    now: NowDep, body: Annotated[RawBody, Depends(raw_body)],
) -> Response:
    """Append to the task's log: text, one line per line, or JSON ``{"line": ...}`` or a list."""
    lines = log_lines(body, now)
    return _reported(run_id, task_run_id, resources, Report("heartbeat", attempt, logs=lines))


@router.post("/storage", status_code=204, response_class=Response,
             dependencies=[Depends(require_json)])
def storage(
    run_id: UUID, task_run_id: UUID, attempt: Attempt, resources: ResourcesDep,
    data: Annotated[dict[str, Any], Body(description="The new job storage, whole.")],
    *, limits: LimitsDep,
) -> Response:
    """Save a JSON object as the job's storage, for its next runs (as ``[saveJobStorage]``)."""
    size = len(json.dumps(data, separators=(",", ":")).encode())
    if size > limits.max_params_bytes:
        raise InvalidInput(("body",), f"is {size} bytes as JSON; the limit is "
                           f"{limits.max_params_bytes}")
    return _reported(run_id, task_run_id, resources, Report("heartbeat", attempt, storage=data))


@router.post("/status", status_code=204, response_class=Response,
             dependencies=[Depends(require_json)])
def status(
    run_id: UUID, task_run_id: UUID, attempt: Attempt, resources: ResourcesDep,
    body: StatusCallback,
) -> Response:
    """The attempt is done: COMPLETED or FAILED, with a message and an output.

    An identical repeat is answered 204 as the first was.
    """
    report = Report("finished", attempt, body.state, body.output, body.message)
    return _reported(run_id, task_run_id, resources, report)


def log_lines(body: RawBody, now: datetime) -> list[LogLine]:
    """The lines a ``log`` callback carries; long lines are cut as a worker cuts them."""
    if body.media_type == "application/json" or body.media_type.endswith("+json"):
        entries = _json_lines(body.data)
    else:
        entries = [LogLineIn(line=text) for text in body.data.decode(errors="replace").splitlines()]
    if len(entries) > MAX_LOG_LINES:
        raise InvalidInput(("body",), f"has {len(entries)} lines; at most {MAX_LOG_LINES} a call")
    if any("\x00" in entry.line for entry in entries):
        raise InvalidInput(("body",), "text may not contain the NUL character")
    return [LogLine(at=now, stream=entry.stream, line=_cut(entry.line)) for entry in entries]


def _json_lines(data: bytes) -> list[LogLineIn]:
    try:
        parsed = json.loads(data) if data.strip() else []
    except ValueError as error:
        raise RequestValidationError([{
            "type": "json_invalid", "loc": ("body", getattr(error, "pos", 0)),
            "msg": "JSON decode error", "ctx": {"error": str(getattr(error, "msg", error))},
        }]) from error
    try:
        value = _LOG_JSON.validate_python(parsed)
    except ValidationError as error:
        faults = [{**e, "loc": ("body", *e["loc"])} for e in error.errors()]
        raise RequestValidationError(faults) from error
    items = value if isinstance(value, list) else [value]
    return [LogLineIn(line=item) if isinstance(item, str) else item for item in items]


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    cut = len(line) - MAX_LINE_CHARS
    return f"{line[:MAX_LINE_CHARS]} [stellwerk: {cut} more characters truncated]"
