"""The ``http`` task type: one REST call, its status mapped to the task's outcome.

Params (``connectors.params.HttpCall``): ``method`` (GET), ``url``, ``headers``,
``json`` (the body), ``timeout`` (seconds, for the whole call; 30). ``secure_params``
may hold ``headers`` too (an ``Authorization`` header, say), merged over the plain
ones; they are never logged nor put in the output. Every call carries the attempt's
``Idempotency-Key``, so the endpoint can tell a redelivery from a new request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import ValidationError

from common.messaging.messages import TaskDispatch
from common.secure_params import SecretBox, SecretKeyError
from common.tracing import current_traceparent, headers_with_trace
from connectors.calls import CallError, call
from connectors.endings import Finished
from connectors.params import HttpCall, describe, merged_headers, secure_headers
from connectors.responses import Answer, failure_message, outcome_for_status, response_output


class HttpTask:
    """The processor of ``http``: a coroutine per attempt on the shared client."""

    def __init__(self, client: aiohttp.ClientSession, secrets: SecretBox) -> None:
        self._client = client
        self._secrets = secrets

    async def __call__(self, dispatch: TaskDispatch) -> Finished:
        """Check the params, make the call, map its answer."""
        try:
            request = HttpCall.model_validate(dispatch.params)
        except ValidationError as error:
            return Finished("REJECTED", f"invalid params: {describe(error, 'params')}")
        headers = call_headers(dispatch, request.headers, self._secrets)
        if isinstance(headers, Finished):
            return headers
        # The called service may trace its side under this attempt (W3C traceparent).
        sent = headers_with_trace(headers.headers, current_traceparent())
        ending = await perform(
            self._client, request.method, request.url, headers=sent,
            timeout_s=request.timeout, json_body=request.body,
        )
        return masked(ending, headers.secrets)


@dataclass(frozen=True)
class CallHeaders:
    """The headers of a call, and the secure values among them (to mask in its output)."""

    headers: dict[str, str]
    secrets: tuple[str, ...]


def call_headers(
    dispatch: TaskDispatch, plain: Mapping[str, str], secrets: SecretBox
) -> CallHeaders | Finished:
    """``plain`` with ``secure_params.headers`` over it and the ``Idempotency-Key``.

    Or how the attempt ends when the secure params cannot be read: FAILED without the
    key (another connector, with the key, may run the next attempt), REJECTED when
    they are not headers.
    """
    try:
        sealed = dispatch.sealed_secure_params
        opened = dispatch.secure_params if sealed is None else secrets.open(sealed)
        secret = secure_headers(opened)
    except SecretKeyError as error:
        return Finished("FAILED", str(error))
    except ValueError as error:
        return Finished("REJECTED", str(error))
    merged = merged_headers(plain, secret, idempotency_key=dispatch.idempotency_key)
    return CallHeaders(merged, tuple(secret.values()))


def masked(ending: Finished, secrets: tuple[str, ...]) -> Finished:
    """``ending`` with every secure header value in its output and message as ``***``.

    An endpoint may echo the headers it got (many test services do); what the task
    sent as a secret must not come back as its output. Values shorter than four
    characters are left alone, as in the workers' log masking.
    """
    hidden = sorted((value for value in secrets if len(value) >= 4), key=len, reverse=True)
    if not hidden:
        return ending

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            for secret in hidden:
                value = value.replace(secret, "***")
            return value
        if isinstance(value, dict):
            return {mask(key): mask(item) for key, item in value.items()}
        if isinstance(value, list):
            return [mask(item) for item in value]
        return value

    return Finished(ending.outcome, mask(ending.message), mask(ending.output),
                    tuple(mask(line) for line in ending.log))


async def perform(
    client: aiohttp.ClientSession, method: str, url: str, *, headers: Mapping[str, str],
    timeout_s: float, json_body: Any = None,
) -> Finished:
    """Make the call; FAILED when there is no answer, else the answer's outcome."""
    try:
        answer = await call(
            client, method, url, headers=headers, timeout_s=timeout_s, json_body=json_body
        )
    except CallError as error:
        message = f"{method} {url}: {error}"
        return Finished("FAILED", message, log=(message,))
    return finished_for(method, url, answer)


def finished_for(method: str, url: str, answer: Answer) -> Finished:
    """The outcome, output and log line of an answer."""
    outcome = outcome_for_status(answer.status)
    message = "" if outcome == "COMPLETED" else failure_message(method, url, answer)
    line = f"{method} {url} -> HTTP {answer.status} in {answer.elapsed_s:.3f} s"
    return Finished(outcome, message, response_output(answer), log=(line,))
