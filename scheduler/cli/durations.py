"""Durations typed on the command line: ``90m``, ``12h``, ``30d``, ``2w``."""

from __future__ import annotations

import re
from datetime import timedelta

from scheduler.cli.errors import CliError

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"(\d+)([smhdw])")


def parse_duration(text: str, option: str = "--expires-in", *, zero: bool = False) -> timedelta:
    """``30d`` → 30 days; a number with one unit of s, m, h, d or w.

    :class:`CliError` naming ``option`` otherwise; ``0s`` only where ``zero`` allows it.
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None or (int(match.group(1)) == 0 and not zero):
        kind = "a number" if zero else "a positive number"
        raise CliError(f"{option}: expected {kind} and a unit (s, m, h, d, w), "
                       f"e.g. 30d; got {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
