"""Following a run until it ends, with a live progress bar and task table.

The run is redrawn on each of its events from ``GET /events`` (re-read with
``GET /runs/{id}``); when the stream cannot be opened or breaks off, it is polled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.live import Live

from scheduler.cli.events import StreamUnavailable
from scheduler.cli.views import run_is_over, run_view

FetchRun = Callable[[], dict[str, Any]]
# Yields once when subscribed, then once per event of the run (``cli.events.run_events``).
RunEvents = Callable[[], Iterable[None]]


def follow_run(
    fetch: FetchRun,
    console: Console,
    *,
    events: RunEvents | None = None,
    interval: timedelta = timedelta(milliseconds=500),
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Redraw the run on each of its events (else every ``interval``) until it ends."""
    run = fetch()
    with Live(run_view(run, with_bar=True), console=console, auto_refresh=False) as live:

        def redraw() -> dict[str, Any]:
            fresh = fetch()
            live.update(run_view(fresh, with_bar=True), refresh=True)
            return fresh

        if events is not None and not run_is_over(run):
            run = _follow_events(events, redraw, run)
        while not run_is_over(run):
            sleep(interval.total_seconds())
            run = redraw()
    return run


def _follow_events(
    events: RunEvents, redraw: Callable[[], dict[str, Any]], run: dict[str, Any]
) -> dict[str, Any]:
    """Redraw on each event until the run is over or the stream ends or breaks."""
    try:
        for _ in events():
            run = redraw()
            if run_is_over(run):
                break
    except StreamUnavailable:
        pass  # polled from here on
    return run


def exit_code(run: dict[str, Any]) -> int:
    """0 for a COMPLETED run, 1 for any other ending."""
    return 0 if run.get("state") == "COMPLETED" else 1
