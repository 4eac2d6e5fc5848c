"""Input PostgreSQL cannot store, refused up front with the place named.

Valid JSON can still break a write: PostgreSQL's text and JSONB refuse the NUL
character (U+0000), and Python's JSON reader accepts ``NaN`` and ``Infinity``,
which JSONB refuses too. Unchecked, both reached the database and came back as 500s.
This dependency runs on every protected route, after authentication and before the
route's body validation, and answers 422 naming the field or parameter at fault.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

_NUL = "\x00"
_SUSPECT = (b"\\u0000", b"NaN", b"Infinity")  # a body without these needs no parse
Loc = tuple[str | int, ...]


async def refuse_unstorable(request: Request) -> None:
    """422 for a NUL in the path, query or body, or a non-finite number in the body."""
    errors = [*_url_faults(request)]
    body = await request.body()
    if any(suspect in body for suspect in _SUSPECT):
        errors += _body_faults(body)
    if errors:
        raise RequestValidationError(errors, body=_parsed(body))


def _url_faults(request: Request) -> Iterator[dict[str, Any]]:
    for name, value in request.path_params.items():
        if _NUL in str(value):
            yield _fault(("path", name), "may not contain the NUL character")
    for name, value in request.query_params.multi_items():
        if _NUL in name or _NUL in value:
            yield _fault(("query", name.replace(_NUL, "")), "may not contain the NUL character")


def _body_faults(body: bytes) -> list[dict[str, Any]]:
    parsed = _parsed(body)
    if parsed is None:
        return []  # not JSON: the route's own parsing reports it
    return unstorable_faults(parsed)


def unstorable_faults(parsed: Any) -> list[dict[str, Any]]:
    """The faults of a parsed body, under ``body`` (also for ``stellwerk.jobs`` requests)."""
    return [_fault(("body", *loc), msg) for loc, msg in _walk(parsed)]


def _walk(value: Any) -> Iterator[tuple[Loc, str]]:
    """Faults inside a parsed JSON document, iteratively (it may be nested deeply)."""
    stack: list[tuple[Loc, Any]] = [((), value)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, str) and _NUL in item:
            yield loc, "text may not contain the NUL character (\\u0000)"
        elif isinstance(item, float) and not math.isfinite(item):
            yield loc, "must be a finite number (NaN and Infinity are not JSON)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if _NUL in key:
                    yield loc, "a key may not contain the NUL character (\\u0000)"
                stack.append(((*loc, key.replace(_NUL, "\\u0000")), child))
        elif isinstance(item, list):
            stack.extend(((*loc, index), child) for index, child in enumerate(item))


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _fault(loc: Loc, msg: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": "value_error"}
