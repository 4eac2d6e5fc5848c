"""``POST /invoke``: a call made on someone else's behalf, its outcome posted back.

The connector as a micro-service in front of another scheduler (docs/decisions.md, "The
connector"): the body is
an ``http`` call (``method``, ``url``, ``headers``, ``json``, ``timeout``) plus
``postback_url`` and optional ``postback_headers``. The answer is 202 with the
invocation's id at once; the call runs on the connector's loop, within its
``--concurrency``, and then its outcome is PUT to ``postback_url`` in the post-back form
of ``PUT /runs/{id}/tasks/{task}/outcome`` (docs/processors.md): ``{"status": <HTTP
status of the call>}``, or ``{"state": "FAILED",
"message": ...}`` when the call got no answer. A post-back that fails (no connection,
408, 425, 429, 5xx) is tried again with a doubling delay, five times in all; any other
answer ends it (a 409 says the receiver has moved on). Invocations live in memory: one
still running when the connector stops is lost, and its caller's own timeout covers it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aiohttp
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from connectors.calls import CallError, call
from connectors.params import (
    IDEMPOTENCY_HEADER,
    Headers,
    HttpCall,
    HttpUrl,
    fault_text,
    merged_headers,
)

logger = logging.getLogger(__name__)

RETRIED_STATUSES = frozenset({408, 425, 429})
POSTBACK_TIMEOUT_S = 10.0


class InvokeRequest(HttpCall):
    """The body of ``POST /invoke``: an ``http`` call and where its outcome goes."""

    postback_url: HttpUrl
    postback_headers: Headers = Field(default_factory=dict)


class InvocationAccepted(BaseModel):
    """The answer to ``POST /invoke``."""

    id: str
    idempotency_key: str


class Invoker:
    """Runs invocations on the loop and posts their outcomes back."""

    def __init__(
        self, client: aiohttp.ClientSession, slots: asyncio.Semaphore, *,
        postback_attempts: int = 5, postback_delay: timedelta = timedelta(milliseconds=500),
    ) -> None:
        self._client = client
        self._slots = slots
        self._postback_attempts = postback_attempts
        self._postback_delay_s = postback_delay.total_seconds()
        self._running: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        """Invocations not yet posted back."""
        return len(self._running)

    def submit(self, request: InvokeRequest) -> InvocationAccepted:
        """Start an invocation; its key is the caller's ``Idempotency-Key`` or its id."""
        invocation_id = uuid.uuid4().hex
        given = [v for k, v in request.headers.items() if k.lower() == IDEMPOTENCY_HEADER.lower()]
        key = given[0] if given else invocation_id
        self._spawn(self._invoke(invocation_id, key, request))
        return InvocationAccepted(id=invocation_id, idempotency_key=key)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _invoke(self, invocation_id: str, key: str, request: InvokeRequest) -> None:
        headers = merged_headers(request.headers, idempotency_key=key)
        async with self._slots:
            try:
                answer = await call(
                    self._client, request.method, request.url, headers=headers,
                    timeout_s=request.timeout, json_body=request.body,
                )
                body: dict[str, Any] = {"status": answer.status}
            except CallError as error:
                body = {"state": "FAILED", "message": f"{request.method} {request.url}: {error}"}
        await self._post_back(invocation_id, request, body)

    async def _post_back(
        self, invocation_id: str, request: InvokeRequest, body: dict[str, Any]
    ) -> None:
        delay_s = self._postback_delay_s
        for attempt in range(1, self._postback_attempts + 1):
            problem = await self._put(request, body)
            if problem is None:
                return
            if not problem.retry or attempt == self._postback_attempts:
                logger.error("invocation %s: post-back gave up: %s", invocation_id, problem.reason)
                return
            logger.warning("invocation %s: post-back failed (%s), again in %g s",
                           invocation_id, problem.reason, delay_s)
            await asyncio.sleep(delay_s)
            delay_s *= 2

    async def _put(self, request: InvokeRequest, body: dict[str, Any]) -> _Problem | None:
        """None when the post-back was taken (2xx, or 409: the receiver moved on)."""
        try:
            answer = await call(
                self._client, "PUT", request.postback_url, headers=request.postback_headers,
                timeout_s=POSTBACK_TIMEOUT_S, json_body=body, cap_bytes=4096,
            )
        except CallError as error:
            return _Problem(str(error), retry=True)
        if 200 <= answer.status < 300 or answer.status == 409:
            return None
        retry = answer.status in RETRIED_STATUSES or answer.status >= 500
        return _Problem(f"HTTP {answer.status}", retry=retry)


@dataclass(frozen=True)
class _Problem:
    """Why a post-back was not taken, and whether trying again may help."""

    reason: str
    retry: bool


def create_app(invoker: Invoker, health: Callable[[], dict[str, Any]]) -> FastAPI:
    """The connector's own HTTP app: ``POST /invoke`` and ``GET /healthz``."""
    app = FastAPI(title="Stellwerk connector", docs_url=None, redoc_url=None)
    app.add_exception_handler(RequestValidationError, _invalid_body)

    @app.post("/invoke", status_code=202)
    async def invoke(request: InvokeRequest) -> InvocationAccepted:
        """Accept a call; its outcome is PUT to ``postback_url`` when it is known."""
        return invoker.submit(request)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """The connector's loop answers; what it holds now."""
        return {"status": "ok", **health()}

    return app


async def _invalid_body(request: Request, exc: Exception) -> JSONResponse:
    """422 as problem+json naming each field at fault, never echoing a value."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": [str(part) for part in item["loc"]], "msg": fault_text(item["msg"])}
        for item in exc.errors()
    ]
    fields = ", ".join(".".join(error["loc"][1:]) or "body" for error in errors)
    body = {
        "type": "about:blank", "title": "Unprocessable Content", "status": 422,
        "detail": f"invalid request body: {fields}", "errors": errors,
    }
    return JSONResponse(body, status_code=422, media_type="application/problem+json")
