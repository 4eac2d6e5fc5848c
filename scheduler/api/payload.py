"""Input PostgreSQL cannot store, refused up front with the place named.

Valid JSON can still break a write: PostgreSQL's text and JSONB refuse the NUL
character (U+0000), and Python's JSON reader accepts ``NaN`` and ``Infinity``,
which JSONB refuses too. Unchecked, both reached the database and came back as 500s.
This dependency runs on every protected route, after authentication and before the
route's body validation, and answers 422 naming the field or parameter at fault.
The faults are found by ``scheduler.services.unstorable``, shared with the
``stellwerk.jobs`` consumer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from scheduler.services.unstorable import NUL, fault, unstorable_faults

_SUSPECT = (b"\\u0000", b"NaN", b"Infinity")  # a body without these needs no parse
_BODILESS = frozenset({"GET", "HEAD"})


async def refuse_unstorable(request: Request) -> None:
    """422 for a NUL in the path, query or body, or a non-finite number in the body."""
    errors = [*_url_faults(request)]
    # A GET's body is read by no route: reading it cost every read a receive.
    body = b"" if request.method in _BODILESS else await request.body()
    if any(suspect in body for suspect in _SUSPECT):
        errors += _body_faults(body)
    if errors:
        raise RequestValidationError(errors, body=_parsed(body))


def _url_faults(request: Request) -> Iterator[dict[str, Any]]:
    for name, value in request.path_params.items():
        if NUL in str(value):
            yield fault(("path", name), "may not contain the NUL character")
    for name, value in request.query_params.multi_items():
        if NUL in name or NUL in value:
            yield fault(("query", name.replace(NUL, "")), "may not contain the NUL character")


def _body_faults(body: bytes) -> list[dict[str, Any]]:
    parsed = _parsed(body)
    if parsed is None:
        return []  # not JSON: the route's own parsing reports it
    return unstorable_faults(parsed)


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None
