"""Arrays sent to PostgreSQL as array literals: one string parameter each.

The engine and the beat send their rows as one array per column (``unnest``). psycopg
adapts a Python list in Python, element by element, after looking through it to choose
a dumper: ~25 µs of CPU for a statement of five short arrays, and the engine sends
about ten such statements a batch. The literal built here with one ``join`` is a single
string parameter that PostgreSQL parses; every statement that takes one names the
array's type (``%b::uuid[]``, or a column's with ``= ANY(%s)``).

Elements: ``None`` (NULL), ``str``, ``UUID`` (as its 32 hex digits, which PostgreSQL
reads as a uuid: a third of ``str``'s cost), ``int``, ``float``, ``bool`` and aware
``datetime`` (a batch's rows share a handful of times: their text is cached). A string
is always quoted, its backslashes and double quotes escaped (the array literal's own
rules), so any text survives. Other types raise ``TypeError``: a value
the literal would misrepresent must not reach the database as something else.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from operator import attrgetter
from typing import Any

# Distinct times whose text is kept: a batch's rows carry its ``now`` and a few deadlines.
TIMESTAMPS_CACHED = 1024


def literal(values: Iterable[Any]) -> str:
    """The PostgreSQL array literal of ``values`` (one dimension)."""
    return "{" + ",".join(map(_element, values)) + "}"


def literals(columns: Iterable[Sequence[Any]]) -> list[str]:
    """:func:`literal` of each column: the parameters of an ``unnest`` statement."""
    return [literal(column) for column in columns]


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@lru_cache(maxsize=TIMESTAMPS_CACHED)
def _timestamp(value: datetime) -> str:
    if value.tzinfo is None:
        raise TypeError(f"a naive datetime in an array: {value!r}")
    return value.isoformat()


_FORMATS: dict[type, Callable[[Any], str]] = {
    str: _quoted,
    uuid.UUID: attrgetter("hex"),
    int: str,
    float: repr,  # 'inf' and 'nan' are PostgreSQL's too
    bool: lambda value: "t" if value else "f",
    datetime: _timestamp,
}


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    form = _FORMATS.get(type(value))
    if form is None:
        raise TypeError(f"no array literal for {type(value).__name__} values: {value!r}")
    return form(value)
