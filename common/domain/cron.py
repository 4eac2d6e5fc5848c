"""Cron fire times in an IANA zone, exactly as classic (Vixie/ISC) cron (issue 14).

The rules: docs/job-spec.md, "Cron syntax"; why: docs/decisions.md, "Classic cron, owned".

The syntax and the sets of allowed values come from :mod:`common.domain.cron_syntax`;
this module walks local wall times that match and decides which instant each fires at.
It owns the matching rather than using croniter, which widens equal ranges to ``*``
(``0 3-3 * * *`` fired hourly) and ORs ``*/2`` with a day-of-week (issue 14).

* A day matches when both day fields do if either field starts with ``*``, else when
  either does (Vixie's DOM_STAR/DOW_STAR): ``0 0 */2 * 1`` fires on odd-day Mondays.
* A *wild* job (its minute or hour field starts with ``*``) follows real time: it
  fires at every instant whose local wall time matches, twice through a repeated hour
  and never in a spring-forward gap.
* Any other job fires a wall time that occurs twice once, at its first occurrence, and
  a wall time skipped by a spring-forward right after the gap (``30 2 * * *`` in
  Europe/Berlin on 2027-03-28 fires at 03:00 CEST); several skipped wall times of one
  gap make one fire.

Pure: no I/O; zoneinfo only computes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.domain.cron_syntax import CronError, CronFields, parse_fields

__all__ = ["CronError", "CronSchedule"]

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
# Offset changes are scanned in steps of this size; two changes of one zone are never
# closer than this (the closest in the tz database are weeks apart).
TRANSITION_SCAN_STEP = timedelta(hours=12)
# Weekdays and leap days repeat within 28 years (1901-2099), so a day that matches at
# all matches within this span of any start.
MATCH_HORIZON = timedelta(days=29 * 366)


@dataclass(frozen=True)
class CronSchedule:
    """A five-field cron expression in a zone; build it with :meth:`parse`."""

    expression: str
    zone: ZoneInfo
    follows_real_time: bool
    fields: CronFields = field(compare=False, repr=False)

    @classmethod
    def parse(cls, expression: str, timezone: str) -> CronSchedule:
        """Check and normalise; raise :class:`CronError` for anything not schedulable."""
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise CronError(f"unknown time zone {timezone!r}") from error
        fields = parse_fields(expression)
        if _next_day(fields, date(2000, 1, 1), date(2000, 1, 1) + MATCH_HORIZON) is None:
            raise CronError(f"{expression.strip()!r} never fires (no such day)")
        return cls(fields.text, zone, fields.wild, fields)

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
        # From the wall time just before ``start``, so a start right at the end of a
        # gap still sees the gap's skipped wall times (they fire at that instant).
        begin = min(_wall(start, self.zone), _wall(start - SECOND, self.zone) + SECOND)
        instant = None
        for wall in _walls_from(self.fields, _ceil_minute(begin)):
            instant = self._instant(wall, start)
            if instant is not None:
                break
        assert instant is not None  # parse refused expressions that never match
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


def _walls_from(fields: CronFields, begin: datetime) -> Iterator[datetime]:
    """Matching naive wall times at or after ``begin`` (whole minute), increasing.

    Day, then hour, then minute: a yearly job costs a few steps, not a year of minutes.
    """
    day: date | None = begin.date()
    floor = (begin.hour, begin.minute)
    while day is not None:
        if _day_matches(fields, day):
            for hour in fields.hours:
                for minute in fields.minutes:
                    if (hour, minute) >= floor:
                        yield datetime.combine(day, time(hour, minute))
        floor = (0, 0)
        day = _next_day(fields, day + DAY, day + MATCH_HORIZON)


def _day_matches(fields: CronFields, day: date) -> bool:
    """Vixie's rule: AND the day fields if either starts with ``*``, else OR them."""
    in_month = day.day in fields.days
    in_week = (day.weekday() + 1) % 7 in fields.weekdays
    if fields.dom_star or fields.dow_star:
        return in_month and in_week
    return in_month or in_week


def _next_day(fields: CronFields, day: date, until: date) -> date | None:
    """The first matching day in ``[day, until)``, skipping months that do not match."""
    while day < until:
        if day.month not in fields.months:
            day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
        elif _day_matches(fields, day):
            return day
        else:
            day += DAY
    return None


def _ceil_minute(wall: datetime) -> datetime:
    """The whole minute at or after ``wall``."""
    floor = wall.replace(second=0, microsecond=0)
    return floor if floor == wall else floor + MINUTE


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
