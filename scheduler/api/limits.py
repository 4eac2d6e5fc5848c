"""The API's limits on what it accepts (docs/decisions.md, "Limits").

The body size is enforced by :class:`BodySizeLimit`, an ASGI middleware that buffers
the body up to the limit before any route sees it, so an oversized request is 413 and
costs no more than the limit, whether it declares its length or is sent chunked.
The sizes and the params check are shared with the ``stellwerk.jobs`` consumer
(``scheduler.services.limits``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.domain.patch import JobPatch
from common.domain.spec import JobSpec
from scheduler.api.errors import problem
from scheduler.services.limits import Limits, params_faults


async def get_limits(request: Request) -> Limits:
    """The app's limits (set by ``create_app``).

    Async though it awaits nothing: FastAPI runs a plain function dependency on a
    thread of its pool, a second hop (after the route's own) in every create and change.
    """
    limits: Limits = request.app.state.limits
    return limits


LimitsDep = Annotated[Limits, Depends(get_limits)]


def check_params_sizes(spec: JobSpec | JobPatch, max_bytes: int) -> None:
    """422 naming the first params object (job's or a task's) larger than ``max_bytes``.

    Measured as compact JSON: params travel in every dispatch of every task, so one
    bloated object multiplies through the broker and the workers' memory.
    """
    faults = params_faults(spec, max_bytes)
    if faults:
        names = {"tasks": [{"name": task.name} for task in spec.tasks or []]}
        raise RequestValidationError(faults, body=names)


class BodySizeLimit:
    """413 for a request body over ``max_bytes``; the routes then get the buffered body."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        """Wrap ``app``."""
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length first, then count what arrives."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._declared(scope) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    @staticmethod
    def _declared(scope: Scope) -> int:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return 0
        return 0

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the request body exceeds the limit of {self.max_bytes} bytes"
        await problem(413, detail)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then the client's own messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
