"""A local HTTP server standing in for the outside world in connector tests.

An ASGI app served by uvicorn on a thread of the test process; it answers according
to the path and records every request it gets:

- ``/status/<code>``: answers ``code`` with ``{"answered": code}``;
- ``/slow/<seconds>``: waits, then answers 200 (an endpoint that is slow, not busy);
  :attr:`peak_slow` is the most such requests it held at once;
- ``/gate/<count>/<name>``: held until ``count`` requests to the same path are held at
  once, then that one and every later one answers 200 (a caller's concurrency seen
  without timing); :attr:`peak_slow` counts them too;
- ``/big/<bytes>``: 200 with a text body of that many bytes;
- ``/flaky/<failures>/<name>``: 503 for the first ``failures`` requests to that name,
  then 204 (a post-back receiver that is down for a while).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn


@dataclass(frozen=True)
class Recorded:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


class HttpStub:
    """Serve on 127.0.0.1 until :meth:`close`; :attr:`requests` in arrival order."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._seen = threading.Condition()
        self._failures: Counter[str] = Counter()
        self._slow_now = 0
        self.peak_slow = 0
        self._gates: dict[str, asyncio.Event] = {}  # only the stub's loop thread uses them
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            self._app, host="127.0.0.1", port=self.port, log_level="warning",
            lifespan="off", backlog=2048, limit_concurrency=4000, interface="asgi3",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the HTTP stub did not start"
            time.sleep(0.01)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def received(self, prefix: str) -> list[Recorded]:
        with self._seen:
            return [r for r in self.requests if r.path.startswith(prefix)]

    def wait_for(
        self, prefix: str, count: int = 1, timeout_s: float = 30.0
    ) -> list[Recorded]:
        """The requests whose path starts with ``prefix``, once there are ``count``."""
        def enough() -> list[Recorded] | None:
            found = [r for r in self.requests if r.path.startswith(prefix)]
            return found if len(found) >= count else None

        with self._seen:
            found = self._seen.wait_for(enough, timeout_s)
        assert found, f"{count} request(s) to {prefix} expected; got {self.requests[-5:]}"
        return found

    async def _app(
        self, scope: dict[str, Any], receive: Callable[[], Any], send: Callable[[Any], Any]
    ) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        with self._seen:
            self.requests.append(
                Recorded(scope["method"], scope["path"], headers, body, time.monotonic())
            )
            self._seen.notify_all()
        status, content_type, payload = await self._answer(scope["path"])
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type), (b"etag", b'"v1"')]})
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, path: str) -> tuple[int, bytes, bytes]:
        parts = path.strip("/").split("/")
        kind, arg = parts[0], parts[1] if len(parts) > 1 else ""
        if kind == "status":
            body = b"" if int(arg) in (204, 304) else json.dumps({"answered": int(arg)}).encode()
            return int(arg), b"application/json", body
        if kind == "slow":
            self._slow_now += 1  # only the stub's loop thread touches these
            self.peak_slow = max(self.peak_slow, self._slow_now)
            try:
                await asyncio.sleep(float(arg))
            finally:
                self._slow_now -= 1
            return 200, b"application/json", b'{"slept": true}'
        if kind == "gate":
            await self._through_gate(path, int(arg))
            return 200, b"application/json", b'{"gated": true}'
        if kind == "big":
            return 200, b"text/plain; charset=utf-8", b"x" * int(arg)
        if kind == "flaky":
            with self._seen:
                self._failures[path] += 1
                failed = self._failures[path] <= int(arg)
            return (503 if failed else 204), b"text/plain", b""
        return 404, b"text/plain", b"no such stub route"

    async def _through_gate(self, path: str, count: int) -> None:
        """Hold the request until ``count`` requests to ``path`` are held at once."""
        opened = self._gates.setdefault(path, asyncio.Event())
        self._slow_now += 1
        self.peak_slow = max(self.peak_slow, self._slow_now)
        try:
            if self._slow_now >= count:
                opened.set()
            await opened.wait()
        finally:
            self._slow_now -= 1


def http_stub() -> Iterator[HttpStub]:
    """For fixtures: ``yield from http_stub()``."""
    stub = HttpStub()
    try:
        yield stub
    finally:
        stub.close()
