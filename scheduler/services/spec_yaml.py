"""A job spec written in YAML, turned into the JSON object ``POST /jobs`` takes.

The web UI's submit form accepts YAML as ``stellwerk submit`` does, and a browser has no
YAML reader; rather than ship one in JavaScript, the UI asks the API to convert
(``POST /job-specs/yaml``) and then submits the JSON as any client would, so the job is
checked by exactly one validator. Pure: no I/O, tested without servers.

Refused with a 422 naming the fault: aliases (``*name``; a few bytes of them can stand
for gigabytes once written out as JSON), nesting deeper than ``MAX_DEPTH`` (PyYAML's
time grows with the square of the depth: 3,000 brackets took 5 s, a 1 MiB body would
take hours), values JSON cannot hold (binary, sets, non-finite floats), and a document
that is not a mapping. Both checks read the event stream, which stops at the first fault.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import yaml

from scheduler.services.errors import InvalidInput

_BODY = ("body",)
MAX_DEPTH = 64  # a job spec needs about 6 (tasks, a task, params, a list in them...)
_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def spec_from_yaml(text: str) -> dict[str, Any]:
    """The mapping ``text`` holds, with dates as ISO-8601 strings; :class:`InvalidInput` else."""
    try:
        _check_events(text)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InvalidInput(_BODY, f"invalid YAML{where}: {error.problem or error.context}"
                           ) from error
    except yaml.YAMLError as error:
        raise InvalidInput(_BODY, f"invalid YAML: {error}") from error
    if not isinstance(data, dict):
        kind = "an empty document" if data is None else f"a {type(data).__name__}"
        raise InvalidInput(_BODY, f"a job spec must be a mapping, found {kind}")
    converted: dict[str, Any] = _jsonable(data, _BODY)
    return converted


def _check_events(text: str) -> None:
    """Refuse aliases and deep nesting before anything is built."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        depth += isinstance(event, _OPENS) - isinstance(event, _CLOSES)
        if depth > MAX_DEPTH:
            mark = event.start_mark
            where = f" (line {mark.line + 1})" if mark else ""
            raise InvalidInput(_BODY, f"nested deeper than {MAX_DEPTH} levels{where}")
        if isinstance(event, yaml.AliasEvent):
            mark = event.start_mark
            where = f" at line {mark.line + 1}" if mark else ""
            raise InvalidInput(_BODY, f"YAML aliases are not accepted (*{event.anchor}{where}): "
                               "write the value out")


def _jsonable(value: Any, loc: tuple[str | int, ...]) -> Any:
    """``value`` as JSON can hold it (at most ``MAX_DEPTH`` deep: plain recursion will do)."""
    if isinstance(value, dict):
        converted: dict[str, Any] = {}
        for key, child in value.items():
            name = _key(key, loc)
            converted[name] = _jsonable(child, (*loc, name))
        return converted
    if isinstance(value, list):
        return [_jsonable(child, (*loc, i)) for i, child in enumerate(value)]
    return _scalar(value, loc)


def _key(key: Any, loc: tuple[str | int, ...]) -> str:
    """A mapping key as JSON writes it (YAML also allows numbers, booleans, null)."""
    if isinstance(key, str):
        return key
    if isinstance(key, datetime | date):
        return key.isoformat()
    if key is None or isinstance(key, bool | int | float):
        return json_text(key)
    raise InvalidInput(loc, f"a mapping key must be a plain value, not a {type(key).__name__}")


def _scalar(value: Any, loc: tuple[str | int, ...]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(loc, f"{value} is not a number JSON can hold")
    if isinstance(value, datetime | date):
        return value.isoformat()  # a datetime without an offset stays naive: the API says so
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise InvalidInput(loc, f"a {type(value).__name__} cannot be written as JSON")


def json_text(value: None | bool | int | float) -> str:
    """How JSON spells a plain value (``null``, ``true``, ``1.5``): YAML keys become this."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)
