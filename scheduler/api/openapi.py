"""The published OpenAPI document: FastAPI's, made valid OpenAPI 3.1 and complete.

FastAPI writes three things this API does not do, and leaves out one rule it does:

- the live stream's response is a string of ``text/event-stream`` in 3.1 terms (FastAPI
  describes a stream of events with ``itemSchema``, a keyword of OpenAPI 3.2, which
  made validators refuse the whole 3.1.0 document: issue 14); what each message holds
  is said in words (``_event_stream``);
- every error response is listed as ``application/json`` as well, but errors are only
  ever ``application/problem+json`` (``scheduler.api.errors``);
- no string anywhere may hold the NUL character (``scheduler.api.payload`` refuses it on
  every route: PostgreSQL cannot store it). The rule is applied in one place, so it is
  declared in one place: a ``pattern`` on every string (and object key) that has no
  narrower rule of its own, and free-form JSON values (params, storage, output) as
  ``StorableJson``, so a client generated from the document knows it.

``openapi_document`` is called once per app and cached there, as FastAPI does.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from scheduler.api.errors import PROBLEM_JSON

EVENT_STREAM = "text/event-stream"
# ECMA-262 and Python read it alike: any text without U+0000.
NO_NUL = "^[^\\u0000]*$"
_EVENT_STREAM_SCHEMA = {
    "type": "string",
    "description": "Server-Sent Events, one per state change, until the client leaves. "
    "Each has `event:` (the event's name, e.g. `run.started`), `id:` (give it back as "
    "`Last-Event-ID` to resume) and `data:` (the event as JSON, as webhooks get it).",
}
_NARROWED = ("pattern", "enum", "const")
# The bearer token, as FastAPI's ``HTTPBearer`` would document it. Not a dependency of
# the routes (each dependency costs every request a solve): the routes that need a token
# say so in their ``openapi_extra`` (:func:`bearer_required`).
BEARER = "HTTPBearer"
_BEARER_SCHEME = {"type": "http", "description": "The admin token or an API token.",
                  "scheme": "bearer"}
# Formats whose values cannot hold a NUL (``password``, for one, can).
_NUL_FREE_FORMATS = frozenset({"uuid", "date-time", "date", "time", "duration", "uri", "email"})
STORABLE_JSON = "StorableJson"
_STORABLE_REF = {"$ref": f"#/components/schemas/{STORABLE_JSON}"}
_STORABLE_JSON_SCHEMA = {
    "description": "Any JSON value without the NUL character (U+0000) in a string or key: "
    "PostgreSQL cannot store it.",
    "anyOf": [
        {"type": "string", "pattern": NO_NUL},
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": _STORABLE_REF},
        {"type": "object", "propertyNames": {"pattern": NO_NUL},
         "additionalProperties": _STORABLE_REF},
    ],
}


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The document served at ``.../openapi.json``; built on first use, then kept."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title, version=app.version, openapi_version=app.openapi_version,
            description=app.description, routes=app.routes,
        )
        for operation in _operations(document):
            _event_stream(operation)
            _problems_only(operation)
        _forbid_nul(document)
        components = document.setdefault("components", {})
        components.setdefault("schemas", {})[STORABLE_JSON] = copy.deepcopy(
            _STORABLE_JSON_SCHEMA)
        components["securitySchemes"] = {BEARER: dict(_BEARER_SCHEME)}
        app.openapi_schema = document
    return app.openapi_schema


def bearer_required(extra: dict[str, Any] | None) -> dict[str, Any]:
    """A route's ``openapi_extra`` that says it needs the bearer token."""
    return {**(extra or {}), "security": [{BEARER: []}]}


def _operations(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for path_item in document.get("paths", {}).values():
        yield from (op for op in path_item.values() if isinstance(op, dict))


def _event_stream(operation: dict[str, Any]) -> None:
    """The stream's body said in 3.1 terms: text (no ``itemSchema``, a 3.2 keyword)."""
    for response in operation.get("responses", {}).values():
        media = response.get("content", {}).get(EVENT_STREAM)
        if media is not None:
            media.pop("itemSchema", None)
            media["schema"] = dict(_EVENT_STREAM_SCHEMA)


def _problems_only(operation: dict[str, Any]) -> None:
    """An error response documented as problem+json lists no other media type."""
    for status, response in operation.get("responses", {}).items():
        content = response.get("content", {})
        if status[0] in "45" and PROBLEM_JSON in content:
            response["content"] = {PROBLEM_JSON: content[PROBLEM_JSON]}


def _forbid_nul(node: Any) -> None:
    """The NUL-free pattern on every string and key schema without a narrower rule.

    Iterative: the document is deep, and a schema may be reached twice (no harm).
    """
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            _narrow(item)
            stack.extend(item.values())


def _narrow(schema: dict[str, Any]) -> None:
    kinds = schema.get("type")
    narrowed = schema.get("format") in _NUL_FREE_FORMATS or any(k in schema for k in _NARROWED)
    if kinds == "string" and not narrowed:
        schema["pattern"] = NO_NUL
    keyed = kinds == "object" and schema.get("additionalProperties") is not False
    if keyed and "propertyNames" not in schema:
        schema["propertyNames"] = {"pattern": NO_NUL}
    if schema.get("additionalProperties") is True:  # a free-form value: any storable one
        schema["additionalProperties"] = dict(_STORABLE_REF)
