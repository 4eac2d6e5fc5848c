"""The published OpenAPI document validates as OpenAPI 3.1 and carries the API's rules.

Built from the app as served (no server, no database: the document needs neither).
Before issue 14 the document did not validate: the live stream used ``itemSchema``, a
keyword of OpenAPI 3.2, in a document that says 3.1.0.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openapi_spec_validator import OpenAPIV31SpecValidator

from common.config import Settings
from scheduler.api.app import create_app
from scheduler.api.openapi import EVENT_STREAM, NO_NUL


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    served: dict[str, Any] = TestClient(create_app(Settings())).get(
        "/api/v1/openapi.json").json()
    return served


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1.")
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


def test_the_live_stream_is_described_in_3_1_terms(document: dict[str, Any]) -> None:
    media = document["paths"]["/api/v1/events"]["get"]["responses"]["200"]["content"]
    assert set(media) == {EVENT_STREAM}
    assert "itemSchema" not in media[EVENT_STREAM]
    assert media[EVENT_STREAM]["schema"]["type"] == "string"
    assert "Last-Event-ID" in media[EVENT_STREAM]["schema"]["description"]


def test_errors_are_documented_as_problem_json_only(document: dict[str, Any]) -> None:
    other = [(path, method, status, sorted(response.get("content", {})))
             for path, method, operation in _operations(document)
             for status, response in operation["responses"].items()
             if status[0] == "4" and set(response.get("content", {}))
             - {"application/problem+json"}]
    assert other == []


def test_no_string_parameter_or_field_admits_the_nul_character(
    document: dict[str, Any],
) -> None:
    """The API refuses NUL everywhere (PostgreSQL cannot store it): the document says so."""
    name = document["components"]["schemas"]["JobCreate"]["properties"]["name"]
    assert re.search(name["pattern"], "a\x00b") is None
    admitting = [
        (path, method, parameter["name"])
        for path, method, operation in _operations(document)
        for parameter in operation.get("parameters", [])
        for schema in _strings(parameter["schema"])
        if not _narrowed(schema) or re.search(schema.get("pattern", "^$"), "a\x00b")
    ]
    assert admitting == []
    assert re.fullmatch(NO_NUL, "any text, ünïcode too") and not re.fullmatch(NO_NUL, "\x00")


def _narrowed(schema: dict[str, Any]) -> bool:
    return any(key in schema for key in ("pattern", "format", "enum", "const"))


def _strings(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if schema.get("type") == "string":
        yield schema
    for option in schema.get("anyOf", []):
        yield from _strings(option)
