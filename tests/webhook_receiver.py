"""A local HTTP server standing in for a webhook endpoint (integration and e2e tests).

It records every request as it arrives, answers with the statuses it was scripted
with (then ``default``), and can hold its answers until a test lets them go.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

HOLD_LIMIT_S = 60  # a held answer is given anyway after this long


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers.get("x-stellwerk-event", "")


class Receiver:
    """Answers POSTs on ``url``; ``requests`` holds what arrived, in order."""

    def __init__(self, statuses: Iterable[int] = (), default: int = 200) -> None:
        self._statuses = deque(statuses)
        self._default = default
        self._arrived = threading.Condition()
        self.requests: list[Received] = []
        self.gate = threading.Event()
        self.gate.set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def hold(self) -> None:
        """Answer nothing until :meth:`release`."""
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def wait_for(self, count: int, timeout_s: float = 20) -> list[Received]:
        """The first ``count`` requests, once they have arrived (AssertionError if not)."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.requests)} of {count} requests arrived")
                self._arrived.wait(left)
            return list(self.requests[:count])

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def _record(self, received: Received) -> int:
        with self._arrived:
            self.requests.append(received)
            self._arrived.notify_all()
            return self._statuses.popleft() if self._statuses else self._default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status = receiver._record(Received(self.path, headers, body))
                receiver.gate.wait(HOLD_LIMIT_S)
                try:
                    self.send_response(status)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender is gone (killed mid-delivery)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
