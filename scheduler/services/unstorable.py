"""Input PostgreSQL cannot store, found with the place named.

Valid JSON can still break a write: PostgreSQL's text and JSONB refuse the NUL
character (U+0000), and Python's JSON reader accepts ``NaN`` and ``Infinity``,
which JSONB refuses too. The REST API (``scheduler.api.payload``) and the
``stellwerk.jobs`` consumer (``scheduler.producers.validation``) both refuse them with
these faults, before any write.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

NUL = "\x00"
Loc = tuple[str | int, ...]


def unstorable_faults(parsed: Any) -> list[dict[str, Any]]:
    """The faults of a parsed body, under ``body`` (also for ``stellwerk.jobs`` requests)."""
    return [fault(("body", *loc), msg) for loc, msg in _walk(parsed)]


def _walk(value: Any) -> Iterator[tuple[Loc, str]]:
    """Faults inside a parsed JSON document, iteratively (it may be nested deeply)."""
    stack: list[tuple[Loc, Any]] = [((), value)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, str) and NUL in item:
            yield loc, "text may not contain the NUL character (\\u0000)"
        elif isinstance(item, float) and not math.isfinite(item):
            yield loc, "must be a finite number (NaN and Infinity are not JSON)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if NUL in key:
                    yield loc, "a key may not contain the NUL character (\\u0000)"
                stack.append(((*loc, key.replace(NUL, "\\u0000")), child))
        elif isinstance(item, list):
            stack.extend(((*loc, index), child) for index, child in enumerate(item))


def fault(loc: Loc, msg: str) -> dict[str, Any]:
    """A fault as pydantic reports one (``loc``, ``msg``, ``type``)."""
    return {"loc": loc, "msg": msg, "type": "value_error"}
