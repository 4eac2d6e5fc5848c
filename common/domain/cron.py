"""Cron fire times in an IANA zone, with classic-cron DST behaviour (SPEC §2).

croniter walks local wall times; this module decides which instant each wall time
fires at, because croniter alone gets autumn wrong (it fires ``30 2 * * *`` twice on
a night whose 02:30 occurs twice). The rules, as Vixie cron has them:

* A *fixed-time* expression (its hour field names hours: ``30 2 * * *``) fires a wall
  time that occurs twice once, at its first occurrence, and a wall time skipped by a
  spring-forward right after the gap (``30 2 * * *`` in Europe/Berlin on 2027-03-28
  fires at 03:00 CEST). Several skipped wall times make one fire.
* An expression whose hour field is ``*`` or a step (``*/15 * * * *``, ``0 */2 * * *``)
  follows real time: it fires at every instant whose local wall time matches, so an
  hourly job fires every hour, also twice through a repeated hour and not in a gap.

Pure: no I/O; croniter and zoneinfo only compute.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

SECOND = timedelta(seconds=1)
# Offset changes are scanned in steps of this size; two changes of one zone are never
# closer than this (the closest in the tz database are weeks apart).
TRANSITION_SCAN_STEP = timedelta(hours=12)
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class CronError(ValueError):
    """A cron expression or time zone that cannot be scheduled; the message says why."""


@dataclass(frozen=True)
class CronSchedule:
    """A five-field cron expression in a zone; build it with :meth:`parse`."""

    expression: str
    zone: ZoneInfo
    follows_real_time: bool

    @classmethod
    def parse(cls, expression: str, timezone: str) -> CronSchedule:
        """Check and normalise; raise :class:`CronError` for anything not schedulable."""
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise CronError(f"unknown time zone {timezone!r}") from error
        text = MACROS.get(expression.strip().lower(), expression.strip())
        fields = text.split()
        if len(fields) != 5 or not croniter.is_valid(text):
            raise CronError(f"{expression!r} is not a five-field cron expression")
        try:
            croniter(text, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
        except CroniterBadDateError as error:
            raise CronError(f"{expression!r} never fires") from error
        hours = fields[1]
        return cls(" ".join(fields), zone, "*" in hours or "/" in hours)

    def next_after(self, after: datetime) -> datetime:
        """The first fire strictly after ``after`` (aware), in UTC."""
        start = after.astimezone(UTC).replace(microsecond=0) + SECOND
        return self._at_or_after(start)

    def fires_after(self, after: datetime, count: int) -> list[datetime]:
        """The next ``count`` fires strictly after ``after``, in UTC, increasing."""
        fires: list[datetime] = []
        for fire in self.iter_after(after):
            if len(fires) >= count:
                break
            fires.append(fire)
        return fires

    def iter_after(self, after: datetime) -> Iterator[datetime]:
        """Fires strictly after ``after``, endlessly."""
        fire = after
        while True:
            fire = self.next_after(fire)
            yield fire

    def _at_or_after(self, start: datetime) -> datetime:
        """The first fire at or after ``start`` (UTC, whole seconds)."""
        walls = croniter(self.expression, _wall(start, self.zone) - SECOND)
        while True:
            instant = self._instant(walls.get_next(datetime), start)
            if instant is not None:
                break
        if self.follows_real_time:
            # Between start and that fire the clock may turn back and repeat wall
            # times that match again; the earliest of those fires first.
            rewind = _first_backward_change(self.zone, start, instant)
            if rewind is not None:
                return min(instant, self._at_or_after(rewind))
        return instant

    def _instant(self, wall: datetime, start: datetime) -> datetime | None:
        """When the matching ``wall`` time fires, if at or after ``start``; else None."""
        first = wall.replace(tzinfo=self.zone).astimezone(UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        if _wall(first, self.zone) != wall:  # in a spring-forward gap
            if self.follows_real_time:
                return None
            gap_end = _offset_change(self.zone, second, first)
            return gap_end if gap_end >= start else None
        candidates = [first, second] if self.follows_real_time else [first]
        return min((c for c in candidates if c >= start), default=None)


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive local wall time of an instant."""
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def _offset_change(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first instant in ``(before, after]`` with ``after``'s offset (one change between)."""
    target = _offset(after, zone)
    low, high = 0, int((after - before).total_seconds())
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(before + timedelta(seconds=middle), zone) == target:
            high = middle
        else:
            low = middle
    return before + timedelta(seconds=high)


def _first_backward_change(zone: ZoneInfo, start: datetime, end: datetime) -> datetime | None:
    """The first instant in ``(start, end]`` at which the zone's clocks turn back, if any."""
    low = start
    while low < end:
        high = min(low + TRANSITION_SCAN_STEP, end)
        if _offset(high, zone) < _offset(low, zone):
            return _offset_change(zone, low, high)
        low = high
    return None
