"""The terminal of ``stellwerk up``: every child's lines, prefixed with its name and colour."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan")


class PrefixedOutput:
    """A line sink for the supervisor: ``engine | <line>``, names aligned and coloured."""

    def __init__(self, console: Console, names: Iterable[str]) -> None:
        self.console = console
        self._names = list(names)
        self._width = max((len(name) for name in self._names), default=0)

    def __call__(self, name: str, line: str) -> None:
        """Print one line of ``name``'s output (not interpreted as rich markup)."""
        if name not in self._names:
            self._names.append(name)
            self._width = max(self._width, len(name))
        colour = COLOURS[self._names.index(name) % len(COLOURS)]
        prefix = Text(f"{name:<{self._width}} | ", style=colour)
        self.console.print(prefix + Text(line), soft_wrap=True, highlight=False)


class SinkHandler(logging.Handler):
    """Shows log records (e.g. the supervisor's restarts) among the children's lines."""

    def __init__(self, sink: PrefixedOutput, name: str) -> None:
        super().__init__()
        self._sink = sink
        self._source = name

    def emit(self, record: logging.LogRecord) -> None:
        """Send the formatted record to the sink under this handler's name."""
        try:
            self._sink(self._source, self.format(record))
        except Exception:  # logging must never raise: report it the way logging.Handler does
            self.handleError(record)
