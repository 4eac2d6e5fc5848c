"""Admitting at most as many requests at once as there are request threads.

A sync route holds its session's database connection from its first query until the
request ends, and FastAPI hops to a worker thread more than once per request (the
route, then the validation of its response). With more requests in flight than
threads, every thread could wait for a connection while every connection was held by
a request waiting for a thread: 200 clients deadlocked the API until the pool's 30 s
timeout (measured with ``bench/api_load.py``). Requests beyond the limit wait here, in
arrival order, holding nothing.

The reads the event loop answers (a job, a run: ``Resources.reads``) hold no thread and
take their connection from a pool of their own, which queues them: they take no slot,
so a poller is not kept waiting behind creates and lists.
"""

from __future__ import annotations

import asyncio
import re

from starlette.types import ASGIApp, Receive, Scope, Send


class Admission:
    """ASGI middleware: at most ``limit`` HTTP requests are being handled at a time.

    Long-lived streams must not take a slot: server-sent events (list their path
    prefixes in ``exempt``) and followed logs (any request with ``follow=true``); nor do
    the ``GET`` requests whose paths ``on_loop`` matches in full.
    """

    def __init__(
        self, app: ASGIApp, limit: int, exempt: tuple[str, ...] = (),
        on_loop: re.Pattern[str] | None = None,
    ) -> None:
        """Wrap ``app``."""
        self.app = app
        self.exempt = exempt
        self.on_loop = on_loop
        self._limit = limit
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wait for a slot, then handle the request."""
        if (
            scope["type"] != "http" or scope["path"].startswith(self.exempt)
            or b"follow=true" in scope.get("query_string", b"")
            or (self.on_loop is not None and scope["method"] == "GET"
                and self.on_loop.fullmatch(scope["path"]))
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


def loop_reads(base: str) -> re.Pattern[str]:
    """``on_loop`` for an API under ``base``: the paths the event loop answers.

    A job, a run, the lists of jobs and of runs, a job's runs and history and a run's
    journal are read from ``Resources.reads``.
    """
    return re.compile(
        f"{re.escape(base)}/(?:(?:jobs|runs)(?:/[^/]+)?|jobs/[^/]+/(?:runs|history)"
        "|runs/[^/]+/journal)")
