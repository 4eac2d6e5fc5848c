"""The shape of an ``http`` call and a ``webservice`` target: pure, checked where written.

The API checks an ``http`` task's params with :class:`HttpCall` when a job is written
(``common.domain.builtin_params``), and the connector checks them again with the same
model when the attempt runs, so a task accepted at submit is one the connector accepts.
A refusal names the param at fault and never repeats its value: a header may be a
credential.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# A call that answers nothing within this long fails, unless ``timeout`` says otherwise.
DEFAULT_CALL_TIMEOUT_S = 30.0
MAX_CALL_TIMEOUT_S = 24 * 3600.0
# RFC 9110 token characters; values: visible ASCII, spaces and tabs (no CR, LF or NUL).
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*$")


def _method(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


def _known_method(value: str) -> str:
    if value not in METHODS:
        raise ValueError(f"must be one of {', '.join(sorted(METHODS))}")
    return value


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("must be an absolute http:// or https:// URL")
    if any(char.isspace() for char in value):
        raise ValueError("must not contain whitespace")
    return value


def _headers(value: dict[str, str]) -> dict[str, str]:
    for name, text in value.items():
        if not _HEADER_NAME.match(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP token")
        if not _HEADER_VALUE.match(text):
            raise ValueError(f"the value of header {name!r} must be printable ASCII")
    return value


Method = Annotated[str, BeforeValidator(_method), AfterValidator(_known_method)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
Headers = Annotated[dict[str, str], AfterValidator(_headers)]


class HttpCall(BaseModel):
    """One REST call: the params of an ``http`` task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Method = "GET"
    url: HttpUrl
    headers: Headers = Field(default_factory=dict)
    body: Any = Field(default=None, alias="json")
    timeout: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0, le=MAX_CALL_TIMEOUT_S)

    @property
    def sends_json(self) -> bool:
        """Whether the params named a ``json`` body (``null`` sends no body)."""
        return self.body is not None


class WebserviceTarget(BaseModel):
    """Where a ``webservice`` task is sent; its other params go along to the worker."""

    model_config = ConfigDict(extra="allow", frozen=True)

    url: HttpUrl
    headers: Headers = Field(default_factory=dict)

    @property
    def task_params(self) -> dict[str, Any]:
        """The params the worker gets: all but ``url`` and ``headers``."""
        return dict(self.model_extra or {})
