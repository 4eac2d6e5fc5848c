"""Following a run until it ends, with a live progress bar and task table.

The run is redrawn on each of its events from ``GET /events`` (re-read with
``GET /runs/{id}``); when the stream cannot be opened or breaks off, it is polled. The
stream is read on a thread of its own, so that ``watch`` also acts while the run is
quiet: a task that stays READY sends no event, and a type no worker serves is said
(:class:`UnservedTypes`) while the stream is silent.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from scheduler.cli.events import StreamUnavailable
from scheduler.cli.views import run_is_over, run_view
from stellwerk.client import ClientError

FetchRun = Callable[[], dict[str, Any]]
# Yields once when subscribed, then once per event of the run (``cli.events.run_events``).
RunEvents = Callable[[], Iterable[None]]
# ``GET /processors``: each task type, whether a live worker serves it (docs/processors.md);
# raises ``ClientError`` when the API cannot say.
FetchProcessors = Callable[[], dict[str, Any]]
Notice = Callable[[dict[str, Any]], list[str]]


def follow_run(
    fetch: FetchRun,
    console: Console,
    *,
    events: RunEvents | None = None,
    notice: Notice | None = None,
    interval: timedelta = timedelta(milliseconds=500),
    tick: timedelta = timedelta(seconds=1),
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Redraw the run on each of its events (else every ``interval``) until it ends.

    ``notice`` is shown the run after each redraw and, while the stream is quiet, every
    ``tick``; the lines it returns are printed above the live view.
    """
    run = fetch()
    with Live(run_view(run, with_bar=True), console=console, auto_refresh=False) as live:

        def redraw() -> dict[str, Any]:
            fresh = fetch()
            live.update(run_view(fresh, with_bar=True), refresh=True)
            return fresh

        def look(current: dict[str, Any]) -> None:
            for line in notice(current) if notice is not None else ():
                live.console.print(Text(line, style="yellow"), soft_wrap=True)

        look(run)
        if events is not None and not run_is_over(run):
            run = _follow_events(_signals(events, tick), redraw, look, run)
        while not run_is_over(run):
            sleep(interval.total_seconds())
            run = redraw()
            look(run)
    return run


def _follow_events(
    signals: Iterator[bool],
    redraw: Callable[[], dict[str, Any]],
    look: Callable[[dict[str, Any]], None],
    run: dict[str, Any],
) -> dict[str, Any]:
    """Redraw on each event until the run is over or the stream ends or breaks.

    A tick without an event (``False``) redraws nothing; it only lets ``look`` act.
    """
    try:
        for event in signals:
            run = redraw() if event else run
            if run_is_over(run):
                break
            look(run)
    except StreamUnavailable:
        pass  # polled from here on
    return run


_END = object()


def _signals(events: RunEvents, tick: timedelta) -> Iterator[bool]:
    """True per event, False after each ``tick`` without one; ends as the stream does.

    The stream is read on a daemon thread: a read blocks until the API sends something,
    which it may not do for as long as the run is quiet. The thread is left behind when
    the run ends; it ends with the stream (the client closes, or the process exits).
    """
    received: queue.Queue[object] = queue.Queue()

    def pump() -> None:
        try:
            for _ in events():
                received.put(None)
        except Exception as error:  # handed to the watching thread, raised there
            received.put(error)
        else:
            received.put(_END)

    threading.Thread(target=pump, name="stellwerk-watch-events", daemon=True).start()
    while True:
        try:
            item = received.get(timeout=tick.total_seconds())
        except queue.Empty:
            yield False
            continue
        if item is _END:
            return
        if isinstance(item, Exception):
            raise item
        yield True


class UnservedTypes:
    """Says once per task type that no worker serves it, when a task waits READY for it.

    Without it ``watch`` waited silently forever for a task of a type no worker serves.
    A task READY for ``after`` (as watched from here) prompts a look at
    ``GET /processors``, at most once per ``every`` and only while such a task waits, so
    a busy but served type costs one call every few seconds, a run that flows none.
    """

    def __init__(
        self,
        fetch_processors: FetchProcessors,
        *,
        after: timedelta = timedelta(seconds=5),
        every: timedelta = timedelta(seconds=5),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch_processors
        self._after_s = after.total_seconds()
        self._every_s = every.total_seconds()
        self._clock = clock
        self._ready_since: dict[str, float] = {}
        self._told: set[str] = set()
        self._next_look = float("-inf")

    def __call__(self, run: dict[str, Any]) -> list[str]:
        """The lines to print about this view of the run (mostly none)."""
        now = self._clock()
        waiting = self._waiting_types(run, now) - self._told
        if not waiting or now < self._next_look:
            return []
        self._next_look = now + self._every_s
        served = self._served_types()
        if served is None:
            return []
        unserved = sorted(waiting - served)
        self._told.update(unserved)
        return [unserved_line(task_type) for task_type in unserved]

    def _waiting_types(self, run: dict[str, Any], now: float) -> set[str]:
        """Types of the tasks READY for ``after`` or longer, timed from when first seen."""
        ready = {
            str(task.get("id") or task.get("name")): str(task.get("type"))
            for task in run.get("tasks", ())
            if task.get("state") == "READY"
        }
        self._ready_since = {task: self._ready_since.get(task, now) for task in ready}
        return {ready[task] for task, since in self._ready_since.items()
                if now - since >= self._after_s}

    def _served_types(self) -> set[str] | None:
        """The types a live worker serves; None if the API could not say (looked at later)."""
        try:
            answer = self._fetch()
        except ClientError:
            return None
        return {
            str(item.get("type"))
            for item in answer.get("data") or []
            if isinstance(item, dict) and item.get("served")
        }


def unserved_line(task_type: str) -> str:
    """What to tell the user about a task type that no live worker serves."""
    return (f"waiting: no worker serves task type {task_type!r} "
            f"(start one: stellwerk worker --types {task_type})")


def exit_code(run: dict[str, Any]) -> int:
    """0 for a COMPLETED run, 1 for any other ending."""
    return 0 if run.get("state") == "COMPLETED" else 1
