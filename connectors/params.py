"""The params of an ``http`` call, a ``webservice`` task and ``POST /invoke``, checked.

The shapes (:class:`HttpCall`, :class:`WebserviceTarget`) live in
``common.domain.http_call``, where the API checks a job's ``http`` tasks with them too;
the task processors and the ``/invoke`` route use the same models, so that a task and
an invocation accept exactly the same request. A refusal names the param at fault
(``params.timeout: ...``) and never repeats its value: a header may be a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from common.domain.builtin_params import describe, fault_text
from common.domain.http_call import (
    DEFAULT_CALL_TIMEOUT_S,
    Headers,
    HttpCall,
    HttpUrl,
    WebserviceTarget,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S", "IDEMPOTENCY_HEADER", "Headers", "HttpCall", "HttpUrl",
    "WebserviceTarget", "describe", "fault_text", "merged_headers", "secure_headers",
]

IDEMPOTENCY_HEADER = "Idempotency-Key"


def secure_headers(secure_params: Mapping[str, Any]) -> dict[str, str]:
    """``secure_params.headers``, checked like ``headers`` (``{}`` when absent).

    Raises ``ValueError`` naming the param; the message never holds a value.
    """
    if "headers" not in secure_params:
        return {}
    try:
        return TypeAdapter(Headers).validate_python(secure_params["headers"])
    except ValidationError as error:
        # Only the fault's kind and where: a header's name may itself be a secret hint.
        kinds = sorted({item["type"] for item in error.errors(include_input=False)})
        raise ValueError(
            f"secure_params.headers must be an object of header names to printable "
            f"ASCII strings ({', '.join(kinds)})"
        ) from None


def merged_headers(*layers: Mapping[str, str], idempotency_key: str) -> dict[str, str]:
    """The headers of a call: later layers win (names compare case-insensitively).

    The ``Idempotency-Key`` is always the attempt's own, whatever the layers say.
    """
    merged: dict[str, str] = {}
    for layer in layers:
        for name, value in layer.items():
            for existing in [key for key in merged if key.lower() == name.lower()]:
                del merged[existing]
            merged[name] = value
    for existing in [key for key in merged if key.lower() == IDEMPOTENCY_HEADER.lower()]:
        del merged[existing]
    merged[IDEMPOTENCY_HEADER] = idempotency_key
    return merged
