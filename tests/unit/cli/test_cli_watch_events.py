"""``stellwerk watch`` redraws on the run's events from ``GET /events`` (a local SSE server)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.unit.cli.test_cli_client import RUN_ID, RUN_PATH, a_run, no_ambient_config, stellwerk

__all__ = ["no_ambient_config"]  # the autouse fixture, for these tests too

STREAM = (b": ping\n\n"
          b"event: task.active\nid: 1-0\ndata: {\"event\": \"task.active\"}\n\n"
          b"event: run.completed\nid: 2-0\ndata: {\"event\": \"run.completed\"}\n\n")


class SseApi:
    """Serves a run that completes on the third read, and an event stream of two events."""

    def __init__(self, stream: bytes | None) -> None:
        self.stream = stream
        self.runs = [a_run("ACTIVE", "ACTIVE", "WAITING"), a_run("ACTIVE", "ACTIVE", "WAITING"),
                     a_run("COMPLETED", "COMPLETED", "COMPLETED")]
        self.paths: list[str] = []
        self.release = threading.Event()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                api.paths.append(self.path)
                if self.path.startswith("/api/v1/events") and api.stream is not None:
                    self._stream(api.stream)
                elif self.path == RUN_PATH:
                    run = api.runs.pop(0) if len(api.runs) > 1 else api.runs[0]
                    self._send(200, "application/json", json.dumps(run).encode())
                else:
                    self._send(404, "application/problem+json", b'{"detail": "no route"}')

            def _stream(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                api.release.wait(10)  # an open stream, as the API keeps it

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        return Handler


def serve(api: SseApi) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        api.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def sse_api() -> Iterator[tuple[SseApi, str]]:
    api = SseApi(STREAM)
    for url in serve(api):
        yield api, url


def test_watch_rereads_the_run_on_each_event_and_stops_when_it_ends(
    sse_api: tuple[SseApi, str],
) -> None:
    api, url = sse_api
    result = stellwerk(url, "watch", RUN_ID)

    assert result.exit_code == 0, result.output
    assert "2/2 tasks" in result.output
    events = [p for p in api.paths if p.startswith("/api/v1/events")]
    assert events == [f"/api/v1/events?run_id={RUN_ID}"]
    # first read, re-read once subscribed, then one per event (the keep-alive is none)
    assert api.paths.count(RUN_PATH) == 3


def test_watch_polls_when_the_stream_ends_before_the_run() -> None:
    api = SseApi(b": ping\n\n")
    api.release.set()  # the stream closes at once
    for url in serve(api):
        result = stellwerk(url, "watch", RUN_ID)
        assert result.exit_code == 0, result.output
        assert api.paths.count(RUN_PATH) == 3  # first read, after subscribing, one poll
