"""Following a run until it ends, with a live progress bar and task table.

It polls ``GET /runs/{id}``; the SSE stream (``GET /events``) can replace the polling
later without changing what the user sees.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.live import Live

from scheduler.cli.views import run_is_over, run_view

FetchRun = Callable[[], dict[str, Any]]


def follow_run(
    fetch: FetchRun,
    console: Console,
    *,
    interval: timedelta = timedelta(milliseconds=500),
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Redraw the run every ``interval`` until it is in a terminal state; return it."""
    run = fetch()
    with Live(run_view(run, with_bar=True), console=console, auto_refresh=False) as live:
        while not run_is_over(run):
            sleep(interval.total_seconds())
            run = fetch()
            live.update(run_view(run, with_bar=True), refresh=True)
    return run


def exit_code(run: dict[str, Any]) -> int:
    """0 for a COMPLETED run, 1 for any other ending."""
    return 0 if run.get("state") == "COMPLETED" else 1
