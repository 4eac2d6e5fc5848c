"""Helpers for the CLI tests: a canned-JSON HTTP server and waiting with deadlines."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Reply = tuple[int, Any]


@dataclass
class CannedApi:
    """Answers (method, path) with canned replies, in order; the last one repeats."""

    url: str = ""
    routes: dict[tuple[str, str], list[Reply]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def reply(self, method: str, path: str, *replies: Reply) -> None:
        self.routes[(method, path)] = list(replies)

    def next_reply(self, method: str, path: str) -> Reply:
        queue = self.routes.get((method, path))
        if not queue:
            return 404, {"title": "Not Found", "status": 404, "detail": f"no route {path}"}
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def calls(self, method: str, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == method and r["path"] == path]


def _handler(api: CannedApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            api.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": json.loads(raw) if raw else None,
                }
            )
            status, body = api.next_reply(self.command, self.path)
            data = json.dumps(body).encode()
            self.send_response(status)
            kind = "application/problem+json" if status >= 400 else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _serve
        do_POST = _serve
        do_PATCH = _serve
        do_DELETE = _serve
        do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    return Handler


@pytest.fixture
def canned_api() -> Iterator[CannedApi]:
    """A real HTTP server on a free local port, serving the replies a test sets up."""
    api = CannedApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    # shutdown() waits for the loop's next poll: 0.5 s by default, per test.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


Waiter = Callable[[Callable[[], bool], str], None]


def _wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def wait_until() -> Waiter:
    """Poll a condition until it holds; fail naming what was awaited after a deadline."""
    return _wait_until
