"""Status → outcome, and the response as task output (capped, JSON or text)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from connectors.responses import (
    MAX_BODY_BYTES,
    Answer,
    failure_message,
    outcome_for_status,
    response_output,
)


def answer(body: bytes, content_type: str = "application/json", *, status: int = 200,
           truncated: bool = False, headers: Mapping[str, str] | None = None) -> Answer:
    return Answer(status, "OK", {"Content-Type": content_type, **(headers or {})}, body,
                  truncated, 0.1)


@pytest.mark.parametrize(("status", "outcome"), [
    (200, "COMPLETED"), (201, "COMPLETED"), (204, "COMPLETED"), (299, "COMPLETED"),
    (401, "REJECTED"), (403, "REJECTED"), (409, "REJECTED"),
    (301, "FAILED"), (400, "FAILED"), (404, "FAILED"), (429, "FAILED"), (500, "FAILED"),
    (503, "FAILED"), (100, "FAILED"),
])
def test_status_maps_to_outcome(status: int, outcome: str) -> None:
    assert outcome_for_status(status) == outcome


def test_a_json_answer_is_output_as_json_with_the_kept_headers() -> None:
    output = response_output(answer(
        b'{"id": 7}', "application/problem+json; charset=utf-8",
        headers={"Location": "/things/7", "Set-Cookie": "session=secret", "ETag": '"x"'},
    ))
    assert output == {
        "status": 200, "json": {"id": 7},
        "headers": {"content-type": "application/problem+json; charset=utf-8",
                    "location": "/things/7", "etag": '"x"'},
    }


def test_other_content_types_and_unparsable_json_are_text() -> None:
    assert response_output(answer(b"<p>hi</p>", "text/html"))["text"] == "<p>hi</p>"
    assert response_output(answer(b"{not json", "application/json"))["text"] == "{not json"
    assert response_output(answer(b"", "text/plain"))["text"] == ""


@pytest.mark.parametrize("body", [b'{"x": NaN}', b'{"x": Infinity}', b'{"x": "a\\u0000b"}'])
def test_json_postgres_cannot_store_is_kept_as_text(body: bytes) -> None:
    output = response_output(answer(body))
    assert "json" not in output
    assert output["text"] == body.decode()


def test_nul_in_text_is_replaced() -> None:
    assert response_output(answer(b"a\x00b", "text/plain"))["text"] == "a\ufffdb"


def test_a_capped_body_is_text_marked_truncated() -> None:
    body = b'{"items": [' + b"1," * MAX_BODY_BYTES
    output = response_output(answer(body[:MAX_BODY_BYTES], truncated=True))
    assert output["truncated"] is True
    assert len(output["text"]) == MAX_BODY_BYTES
    assert "json" not in output


def test_the_charset_of_the_content_type_decodes_the_text() -> None:
    text = response_output(answer("grüß".encode("latin-1"), "text/plain; charset=latin-1"))
    assert text["text"] == "grüß"
    unknown = response_output(answer("grüß".encode(), "text/plain; charset=nonsense"))
    assert unknown["text"] == "grüß"


def test_the_failure_message_names_call_and_status() -> None:
    message = failure_message("POST", "http://x/y", Answer(503, "Service Unavailable", {}, b"",
                                                             False, 0.0))
    assert message == "POST http://x/y answered HTTP 503 Service Unavailable"
