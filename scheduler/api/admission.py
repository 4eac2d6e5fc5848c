"""Admitting as many requests at once as there are request threads.

A sync route holds its session's database connection from its first query until the
request ends, and FastAPI hops to a worker thread more than once per request (the
route, then the validation of its response). With more requests in flight than
threads, every thread could wait for a connection while every connection was held by
a request waiting for a thread: 200 clients deadlocked the API until the pool's 30 s
timeout (measured with ``bench/api_load.py``). Requests beyond the limit wait here, in
arrival order, holding nothing.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send


class Admission:
    """ASGI middleware: at most ``limit`` HTTP requests are being handled at a time.

    Long-lived streams must not take a slot: server-sent events (list their path
    prefixes in ``exempt``) and followed logs (any request with ``follow=true``).
    """

    def __init__(self, app: ASGIApp, limit: int, exempt: tuple[str, ...] = ()) -> None:
        """Wrap ``app``."""
        self.app = app
        self.exempt = exempt
        self._limit = limit
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wait for a slot, then handle the request."""
        if (
            scope["type"] != "http" or scope["path"].startswith(self.exempt)
            or b"follow=true" in scope.get("query_string", b"")
        ):
            await self.app(scope, receive, send)
            return
        async with self._slots_of_this_loop():
            await self.app(scope, receive, send)

    def _slots_of_this_loop(self) -> asyncio.Semaphore:
        """The semaphore of the running loop (test clients run one loop each)."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self._limit), loop
        return self._slots
