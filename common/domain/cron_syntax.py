"""Classic (Vixie/ISC) cron syntax: five fields parsed into sets of allowed values.

Stellwerk accepts exactly what Vixie cron documents and refuses every extension
(``L``, ``W``, ``#``, ``?``, ``H``, seconds or year fields) with an error naming the
field, because croniter accepted them with rules of its own (issue 14). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
NAMES: tuple[dict[str, int], ...] = (
    {}, {}, {}, {name: number + 1 for number, name in enumerate(MONTHS)},
    {name: number for number, name in enumerate(DAYS)},
)
NICKNAMES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
EXTENSIONS = "LW#?H"


class CronError(ValueError):
    """A cron expression or time zone that cannot be scheduled; the message says why."""


@dataclass(frozen=True)
class CronFields:
    """The allowed values of each field, and the flags classic cron keeps beside them.

    ``dom_star``/``dow_star`` are Vixie's DOM_STAR/DOW_STAR: set when the field's text
    starts with ``*`` (also ``*/2``); then the day fields are ANDed, else ORed. ``wild``
    (minute or hour starts with ``*``) decides how the job behaves at a DST change.
    """

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_star: bool
    dow_star: bool
    wild: bool


def parse_fields(expression: str) -> CronFields:
    """Parse a five-field expression or an ``@`` nickname; raise :class:`CronError`."""
    text = " ".join(_expand_nickname(expression.strip()).split())
    fields = text.split(" ") if text else []
    if len(fields) != len(FIELD_NAMES):
        raise CronError(
            f"expected five fields (minute hour day-of-month month day-of-week), got "
            f"{len(fields)}; seconds and year fields are not supported")
    minute, hour, dom, month, dow = (_field_values(i, f) for i, f in enumerate(fields))
    weekdays = frozenset(day % 7 for day in dow)  # 7 is Sunday, as 0
    return CronFields(
        text, tuple(sorted(minute)), tuple(sorted(hour)), frozenset(dom), frozenset(month),
        weekdays, fields[2].startswith("*"), fields[4].startswith("*"),
        fields[0].startswith("*") or fields[1].startswith("*"))


def _expand_nickname(text: str) -> str:
    """An ``@`` nickname's five fields; ``@reboot`` has no fire times, so it is refused."""
    if not text.startswith("@"):
        return text
    fields = NICKNAMES.get(text.lower())
    if fields is None:
        known = " ".join(NICKNAMES)
        raise CronError(f"{text!r} is not supported; the nicknames are {known}")
    return fields


def _field_values(index: int, text: str) -> set[int]:
    """The values one field allows: a list of ``*``, numbers, names, ranges and steps."""
    values: set[int] = set()
    for element in text.split(","):
        values.update(_element_values(index, element))
    return values


def _element_values(index: int, element: str) -> range:
    """One list element: ``*``, ``*/n``, ``a``, ``a-b`` or ``a-b/n``."""
    low, high = BOUNDS[index]
    span, slash, step_text = element.partition("/")
    step = _number(index, step_text, element, step=True) if slash else 1
    if span == "*":
        return range(low, high + 1, step)
    first_text, dash, last_text = span.partition("-")
    first = _number(index, first_text, element)
    if not dash:
        if slash:
            raise CronError(f"{FIELD_NAMES[index]} field: {element!r} has a step without a "
                            f"range (write '{first}-{high}/{step}' or '*/{step}')")
        return range(first, first + 1)
    last = _number(index, last_text, element)
    if last < first:
        raise CronError(f"{FIELD_NAMES[index]} field: {element!r} is a backward range")
    return range(first, last + 1, step)


def _number(index: int, text: str, element: str, *, step: bool = False) -> int:
    """A number (or a month/day name) in the field's range, or a step of at least 1."""
    name = FIELD_NAMES[index]
    low, high = BOUNDS[index]
    if not step and text.lower() in NAMES[index]:
        return NAMES[index][text.lower()]
    if not text.isascii() or not text.isdigit():
        raise CronError(f"{name} field: {_what_is_wrong(text or element)}")
    value = int(text)
    if step and value < 1:
        raise CronError(f"{name} field: step {text} in {element!r} must be at least 1")
    if not step and not low <= value <= high:
        raise CronError(f"{name} field: {value} is out of range {low}-{high}")
    return value


def _what_is_wrong(text: str) -> str:
    """Why a token is not a number: an unsupported extension, or just not one."""
    if any(mark in text.upper() for mark in EXTENSIONS):
        return (f"{text!r} is not supported (the extensions L, W, #, ? and H are refused; "
                f"use numbers, names, '*', ranges, steps and lists)")
    return f"{text!r} is not a number or a name"
