"""Checking the params of http calls, webservice tasks and /invoke bodies."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from connectors.params import (
    DEFAULT_CALL_TIMEOUT_S,
    HttpCall,
    WebserviceTarget,
    describe,
    merged_headers,
    secure_headers,
)


def faults(params: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as caught:
        HttpCall.model_validate(params)
    return describe(caught.value, "params")


def test_defaults_and_normalised_method() -> None:
    call = HttpCall.model_validate({"url": "https://example.com/a?b=1", "method": "patch"})
    assert (call.method, call.headers, call.timeout) == ("PATCH", {}, DEFAULT_CALL_TIMEOUT_S)
    assert not call.sends_json
    assert HttpCall.model_validate({"url": "http://x", "json": [1]}).sends_json


@pytest.mark.parametrize(("params", "expected"), [
    ({}, "params.url: Field required"),
    ({"url": "ftp://host/x"}, "params.url: must be an absolute http:// or https:// URL"),
    ({"url": "/relative"}, "params.url: must be an absolute"),
    ({"url": "http://x/a b"}, "params.url: must not contain whitespace"),
    ({"url": "http://x", "method": "FETCH"}, "params.method: must be one of"),
    ({"url": "http://x", "timeout": 0}, "params.timeout: Input should be greater than 0"),
    ({"url": "http://x", "timeout": "soon"}, "params.timeout:"),
    ({"url": "http://x", "headers": {"X": 1}}, "params.headers.X: Input should be a valid string"),
    ({"url": "http://x", "headers": {"a b": "v"}}, "params.headers: header name 'a b'"),
    ({"url": "http://x", "headers": {"X": "a\r\nInjected: 1"}}, "params.headers: the value of"),
    ({"url": "http://x", "methd": "GET"}, "params.methd: Extra inputs are not permitted"),
])
def test_bad_params_are_named(params: dict[str, object], expected: str) -> None:
    assert expected in faults(params)


def test_a_refusal_never_repeats_a_value() -> None:
    message = faults({"url": "http://x", "headers": {"Authorization": "Bearer \n top-secret"}})
    assert "top-secret" not in message


def test_secure_headers_are_checked_without_naming_them() -> None:
    assert secure_headers({}) == {}
    assert secure_headers({"headers": {"Authorization": "Bearer t"}}) == {
        "Authorization": "Bearer t"}
    with pytest.raises(ValueError, match="secure_params.headers") as caught:
        secure_headers({"headers": {"Authorization": "Bearer \n secret-value"}})
    assert "secret-value" not in str(caught.value)
    with pytest.raises(ValueError, match="secure_params.headers"):
        secure_headers({"headers": "Bearer x"})


def test_later_header_layers_win_and_the_idempotency_key_is_the_attempts() -> None:
    merged = merged_headers(
        {"Accept": "text/plain", "idempotency-key": "mine", "X-A": "1"},
        {"accept": "application/json"},
        idempotency_key="run:1",
    )
    assert merged == {"X-A": "1", "accept": "application/json", "Idempotency-Key": "run:1"}


def test_a_webservice_target_passes_the_other_params_on() -> None:
    target = WebserviceTarget.model_validate(
        {"url": "https://w.example/run", "headers": {"X-T": "1"}, "frames": 3, "mode": "fast"})
    assert target.task_params == {"frames": 3, "mode": "fast"}
    with pytest.raises(ValidationError):
        WebserviceTarget.model_validate({"headers": {}})
