"""Validation faults in words, for people: the one wording of a refused body.

A fault is pydantic's (``loc``, ``msg``); its place is written as a person reads it
(``tasks[1].type (task 'b')``). The REST API (``scheduler.api.errors``) and the
``stellwerk.jobs`` consumer (``scheduler.producers``) both answer with these lines, so
a producer reads the same reason whichever way it submitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_DETAIL_ERRORS = 5


def describe_faults(errors: Sequence[Mapping[str, Any]], body: Any = None) -> str:
    """The one-line ``detail`` of validation faults (``loc`` and ``msg`` each), for people.

    Public because the ``stellwerk.jobs`` consumer answers a bad request with the very
    message ``POST /jobs`` would give.
    """
    lines = [line(where(e["loc"], body), message(dict(e))) for e in errors[:_DETAIL_ERRORS]]
    if len(errors) > _DETAIL_ERRORS:
        lines.append(f"and {len(errors) - _DETAIL_ERRORS} more")
    return "; ".join(lines)


def message(error: dict[str, Any]) -> str:
    """Pydantic's message without its "Value error, " prefix: ours already says enough."""
    if error.get("type") == "missing" and tuple(error.get("loc", ())) == ("body",):
        return "a JSON body is required"
    return str(error.get("msg", "")).removeprefix("Value error, ")


def line(where: str, msg: str) -> str:
    """``where: msg``, or ``msg`` alone when there is no place to name."""
    return f"{where}: {msg}" if where else msg


def where(loc: Sequence[Any], body: Any = None) -> str:
    """Where a fault is, for people: ``tasks[1].type (task 'b')``, ``path parameter job_id``.

    A fault of the whole body (a graph rule) has no place to name; its message names
    the task itself.
    """
    source, *rest = loc or ["request"]
    if source in {"path", "query", "header"} and rest:
        return f"{source} parameter {rest[0]}"
    if source != "body":
        return str(source)
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in rest)
    return text.lstrip(".") + _task_of(rest, body)


def _task_of(rest: Sequence[Any], body: Any) -> str:
    """`` (task 'name')`` when the fault lies inside a task that has a name."""
    if len(rest) < 3 or rest[0] != "tasks" or not isinstance(rest[1], int):
        return ""
    try:
        name = body["tasks"][rest[1]]["name"]
    except (KeyError, IndexError, TypeError):
        return ""
    return f" (task {name!r})" if isinstance(name, str) else ""
