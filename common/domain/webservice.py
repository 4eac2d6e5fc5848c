"""The vocabulary of calls to web services: URLs, header sets, HTTP status -> outcome.

Shared by job specs (a job's ``webservice`` settings), worker types and post-backs
(docs/decisions.md, "Post-backs, web-service callbacks, worker types"). Header
values may be credentials: models here only validate them;
whoever stores them seals them (``common.secure_params``) and shows only their names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from common.domain.header_schema import headers_schema

MAX_URL_CHARS = 2000
MAX_HEADERS = 50
MAX_HEADER_NAME_CHARS = 200
MAX_HEADER_VALUE_CHARS = 8 * 1024
# RFC 9110 ``token``: what a header name may be made of.
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Set by the HTTP client itself; a configured one would corrupt the request.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
ReportedState = Literal["COMPLETED", "FAILED", "REJECTED"]


def _url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("may not carry credentials (user:password@): put them in headers, "
                         "which are stored sealed and never shown")
    return value


def _headers(value: dict[str, str]) -> dict[str, str]:
    if len(value) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers")
    for name, text in value.items():
        if not _HEADER_NAME.match(name) or len(name) > MAX_HEADER_NAME_CHARS:
            raise ValueError(f"header name {name!r} is not an HTTP token "
                             f"(letters, digits, !#$%&'*+-.^_`|~; at most {MAX_HEADER_NAME_CHARS})")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {name!r} is set by the HTTP client")
        if any(c in text for c in "\r\n\x00") or len(text) > MAX_HEADER_VALUE_CHARS:
            # The value is not echoed: it may be a credential.
            raise ValueError(f"the value of header {name!r} must be one line (no CR, LF or "
                             f"NUL) of at most {MAX_HEADER_VALUE_CHARS} characters")
    return value


# The published schema's reading of ``_url`` (issue 14): http(s), a host, no user:password@.
# The host starts with a letter: an address literal may be refused by the egress policy
# at creation (``common.egress``), which depends on the deployment's allowances.
URL_PATTERN = r"^https?://[A-Za-z][^/?#@\s:\[\]\u0000]*(:[0-9]{1,5})?([/?#][^\s\u0000]*)?$"
HttpUrl = Annotated[
    str, Field(max_length=MAX_URL_CHARS, json_schema_extra={"pattern": URL_PATTERN}),
    AfterValidator(_url),
]
_HEADERS_SCHEMA = headers_schema(
    reserved=RESERVED_HEADERS, max_headers=MAX_HEADERS, max_name_chars=MAX_HEADER_NAME_CHARS,
    max_value_chars=MAX_HEADER_VALUE_CHARS,
)
Headers = Annotated[
    dict[str, str], AfterValidator(_headers), Field(json_schema_extra=_HEADERS_SCHEMA),
]


class WebServiceSettings(BaseModel):
    """A job's own settings for its tasks of registered worker types (docs/job-spec.md).

    ``url`` replaces the worker type's URL; ``headers`` are laid over the worker type's
    (a header of the same name, in any case, replaces it). Headers are write-only.
    """

    model_config = ConfigDict(extra="forbid")

    url: HttpUrl | None = None
    headers: Headers = Field(default_factory=dict)


def overlay_headers(base: Mapping[str, str], top: Mapping[str, str]) -> dict[str, str]:
    """``base`` with ``top`` laid over it; header names compare without case."""
    replaced = {name.lower() for name in top}
    merged = {name: value for name, value in base.items() if name.lower() not in replaced}
    merged.update(top)
    return merged


def outcome_of_status(status: int) -> ReportedState:
    """The outcome an HTTP status stands for: 2xx COMPLETED, 401/403/409 REJECTED, else FAILED.

    REJECTED means refused without being executed: not authorised, or in conflict with
    the state of the service (docs/job-spec.md, "Built-in task types", ``http``).
    """
    if 200 <= status < 300:
        return "COMPLETED"
    if status in (401, 403, 409):
        return "REJECTED"
    return "FAILED"
