"""Reading ``GET /events`` (Server-Sent Events) from the client commands.

``watch`` needs a signal per event of one run: it re-reads the run (``GET /runs/{id}``)
on each, so it shows the run as the API has it, whatever the event said. ``stellwerk
events`` prints the events themselves (:func:`event_stream`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import httpx


class StreamUnavailable(Exception):
    """The event stream could not be opened or broke off; the caller polls instead."""


def run_events(http: httpx.Client, run_id: str) -> Iterator[None]:
    """Yield once when the stream is open, then once per event of the run.

    The first yield lets the caller re-read the run after subscribing, so a change made
    between its first read and the subscription is not missed.
    """
    try:
        with http.stream("GET", "/events", params={"run_id": run_id},
                         headers={"Accept": "text/event-stream"}) as response:
            if response.status_code != 200:
                raise StreamUnavailable(f"GET /events answered {response.status_code}")
            yield
            yield from _messages(response.iter_lines())
    except httpx.HTTPError as error:
        raise StreamUnavailable(str(error)) from error


def _messages(lines: Iterator[str]) -> Iterator[None]:
    """One item per complete message with data (comments such as keep-alives are none)."""
    has_data = False
    for line in lines:
        if line.startswith("data:"):
            has_data = True
        elif not line and has_data:
            has_data = False
            yield


def event_stream(http: httpx.Client, params: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """Each event of the stream, decoded, until the server ends it (or forever)."""
    try:
        with http.stream("GET", "/events", params=params, timeout=None,
                         headers={"Accept": "text/event-stream"}) as response:
            if response.status_code != 200:
                response.read()
                raise StreamUnavailable(f"GET /events answered {response.status_code}: "
                                        f"{response.text[:200]}")
            data: list[str] = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    yield json.loads("\n".join(data))
                    data = []
    except httpx.HTTPError as error:
        raise StreamUnavailable(str(error)) from error
