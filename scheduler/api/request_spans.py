"""A span per API request while tracing is on (``common.tracing``), as the trace's root.

Added by ``create_app`` only when tracing is on, so that it costs nothing otherwise. A
caller that sends a W3C ``traceparent`` gets the request in its own trace; a run the
request creates is a child of it (``scheduler.services.runs``), so a run's trace starts
with the request that made it.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.tracing import annotate, span


class RequestSpans:
    """ASGI middleware: ``<METHOD> <path>`` spans with the response's status."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request inside its span; the span says the response's status."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                annotate("http.response.status_code", message["status"])
            await send(message)

        name = f"{scope['method']} {scope['path']}"
        with span(name, headers.get("traceparent"), {
            "http.request.method": scope["method"], "url.path": scope["path"],
        }):
            await self._app(scope, receive, sending)
