"""What an HTTP answer means for a task: its outcome and its output (pure).

The output is the response as JSON: ``status``, a few headers worth keeping, and the
body as ``json`` (when the content type says JSON and it parses) or ``text``. The body is
capped at :data:`MAX_BODY_BYTES`: the output travels in a result message and is stored
in the task run's row, so a large download must not ride along. A body cut at the cap
is kept as ``text`` (a cut JSON document does not parse) with ``truncated: true``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

MAX_BODY_BYTES = 64 * 1024
KEPT_HEADERS = (
    "content-type", "content-length", "location", "etag", "last-modified", "retry-after",
    "x-request-id",
)
REJECTED_STATUSES = frozenset({401, 403, 409})

CallOutcome = Literal["COMPLETED", "FAILED", "REJECTED"]


@dataclass(frozen=True)
class Answer:
    """An HTTP answer as read: the body already cut at the cap."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes
    truncated: bool
    elapsed_s: float


def outcome_for_status(status: int) -> CallOutcome:
    """2xx COMPLETED; 401, 403 and 409 REJECTED (refused, not tried); anything else FAILED."""
    if 200 <= status < 300:
        return "COMPLETED"
    if status in REJECTED_STATUSES:
        return "REJECTED"
    return "FAILED"


def response_output(answer: Answer) -> dict[str, Any]:
    """The task output of an answer (see the module's docstring)."""
    output: dict[str, Any] = {"status": answer.status, "headers": kept_headers(answer.headers)}
    text = _text(answer)
    if not answer.truncated and _is_json(answer.headers):
        parsed = _json(text)
        if parsed is not _NOT_JSON:
            output["json"] = parsed
            return output
    output["text"] = text
    if answer.truncated:
        output["truncated"] = True
    return output


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of :data:`KEPT_HEADERS` the answer has (lower-case names)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return {name: lowered[name] for name in KEPT_HEADERS if name in lowered}


def failure_message(method: str, url: str, answer: Answer) -> str:
    """How a task's message states an answer that was not a success."""
    reason = f" {answer.reason}" if answer.reason else ""
    return f"{method} {url} answered HTTP {answer.status}{reason}"


_NOT_JSON = object()


def _is_json(headers: Mapping[str, str]) -> bool:
    content_type = kept_headers(headers).get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def _text(answer: Answer) -> str:
    """The body as text; NUL becomes U+FFFD, which PostgreSQL's JSONB cannot store."""
    charset = _charset(answer.headers) or "utf-8"
    try:
        text = answer.body.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        text = answer.body.decode("utf-8", errors="replace")
    return text.replace("\x00", "\ufffd")


def _charset(headers: Mapping[str, str]) -> str | None:
    for part in kept_headers(headers).get("content-type", "").split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            return value.strip('"')
    return None


def _json(text: str) -> object:
    """The parsed document, or ``_NOT_JSON``.

    So are documents with NaN, Infinity or an escaped NUL: PostgreSQL cannot store them.
    """
    if "\\u0000" in text:
        return _NOT_JSON
    try:
        return json.loads(text, parse_constant=_refuse)
    except ValueError:
        return _NOT_JSON


def _refuse(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")
