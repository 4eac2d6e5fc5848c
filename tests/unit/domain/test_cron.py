"""Cron fire times as classic (Vixie) cron: examples of issue 14 and 2027's DST changes,
and a property test against a brute-force oracle over every minute of real time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.domain.cron import CronError, CronSchedule

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expression: str, zone: str, after: str, count: int) -> list[str]:
    schedule = CronSchedule.parse(expression, zone)
    return [f.strftime("%Y-%m-%d %H:%M") for f in schedule.fires_after(utc(after), count)]


def fires_until(expression: str, zone: str, after: str, until: str) -> list[str]:
    schedule = CronSchedule.parse(expression, zone)
    got = []
    for fire in schedule.iter_after(utc(after)):
        if fire > utc(until):
            break
        got.append(fire.strftime("%Y-%m-%d %H:%M"))
    return got


# --- DST behaviour of fixed-time jobs (unchanged by issue 14) -----------------------

def test_spring_forward_fires_a_skipped_wall_time_right_after_the_gap() -> None:
    # 2027-03-28 02:00 CET -> 03:00 CEST: 02:30 does not exist; fire at 03:00 CEST.
    assert fires("30 2 * * *", BERLIN, "2027-03-26 12:00", 3) == [
        "2027-03-27 01:30", "2027-03-28 01:00", "2027-03-29 00:30",
    ]


def test_autumn_fires_a_repeated_wall_time_once_at_its_first_occurrence() -> None:
    # 2027-10-31 03:00 CEST -> 02:00 CET: 02:30 occurs at 00:30 and 01:30 UTC.
    assert fires("30 2 * * *", BERLIN, "2027-10-29 12:00", 3) == [
        "2027-10-30 00:30", "2027-10-31 00:30", "2027-11-01 01:30",
    ]
    # Between the two occurrences the next fire is the next day's, not the repeat.
    assert fires("30 2 * * *", BERLIN, "2027-10-31 00:40", 1) == ["2027-11-01 01:30"]


def test_several_skipped_wall_times_make_one_fire() -> None:
    assert fires("0,30 2-3 * * *", BERLIN, "2027-03-27 23:00", 3) == [
        "2027-03-28 01:00", "2027-03-28 01:30", "2027-03-29 00:00",
    ]


def test_a_start_right_at_the_end_of_a_gap_still_fires_the_skipped_wall_time() -> None:
    assert fires("30 2 * * *", BERLIN, "2027-03-28 00:59:59", 1) == ["2027-03-28 01:00"]


def test_step_and_star_hours_follow_real_time() -> None:
    assert fires("*/30 * * * *", BERLIN, "2027-10-31 00:00", 5) == [
        "2027-10-31 00:30", "2027-10-31 01:00", "2027-10-31 01:30", "2027-10-31 02:00",
        "2027-10-31 02:30",
    ]
    assert fires("0 * * * *", BERLIN, "2027-03-28 00:00", 3) == [
        "2027-03-28 01:00", "2027-03-28 02:00", "2027-03-28 03:00",
    ]


def test_a_us_zone_changes_on_its_own_dates() -> None:
    # New York: 2027-03-14 02:00 EST -> 03:00 EDT; 2027-11-07 02:00 EDT -> 01:00 EST.
    assert fires("30 2 * * *", NEW_YORK, "2027-03-13 12:00", 2) == [
        "2027-03-14 07:00", "2027-03-15 06:30",
    ]
    assert fires("30 1 * * *", NEW_YORK, "2027-11-06 12:00", 2) == [
        "2027-11-07 05:30", "2027-11-08 06:30",
    ]


# --- the cases of issue 14 ----------------------------------------------------------

def test_equal_ranges_are_one_value_not_a_star() -> None:
    # 2027-03-29 is a Monday.
    assert fires("0 9-9 * * 1-1", "UTC", "2027-03-27 00:00", 2) == [
        "2027-03-29 09:00", "2027-04-05 09:00",
    ]
    assert fires("0 3-3 * * *", "UTC", "2027-03-27 00:00", 2) == [
        "2027-03-27 03:00", "2027-03-28 03:00",
    ]
    assert fires("0 0 1 1-1 *", "UTC", "2027-03-27 00:00", 2) == [
        "2028-01-01 00:00", "2029-01-01 00:00",
    ]


def test_a_star_step_day_of_month_is_anded_with_the_day_of_week() -> None:
    # Odd-day Mondays only: 2027-03-29 (odd), 04-05 (odd); 03-22, 04-12 are even.
    assert fires("0 0 */2 * 1", "UTC", "2027-03-20 00:00", 4) == [
        "2027-03-29 00:00", "2027-04-05 00:00", "2027-04-19 00:00", "2027-05-03 00:00",
    ]


def test_day_fields_without_a_star_are_ored() -> None:
    # The 13th or any Friday (2027-08-13 is both).
    assert fires("0 0 13 * 5", "UTC", "2027-08-01 00:00", 4) == [
        "2027-08-06 00:00", "2027-08-13 00:00", "2027-08-20 00:00", "2027-08-27 00:00",
    ]


def test_a_wild_minute_skips_the_spring_gap_and_fires_through_the_repeated_hour() -> None:
    # */15 makes the job wild: no fire in Berlin's 2027 gap (02:00-03:00 CET)...
    assert fires_until("*/15 2 * * *", BERLIN, "2027-03-27 12:00", "2027-03-28 23:59") == []
    # ...and both passes through the repeated 02:00-02:59 (CEST, then CET).
    assert fires_until("*/15 2 * * *", BERLIN, "2027-10-30 12:00", "2027-10-31 12:00") == [
        "2027-10-31 00:00", "2027-10-31 00:15", "2027-10-31 00:30", "2027-10-31 00:45",
        "2027-10-31 01:00", "2027-10-31 01:15", "2027-10-31 01:30", "2027-10-31 01:45",
    ]


def test_a_range_step_hour_is_not_wild_and_fires_a_repeated_hour_once() -> None:
    # 2027-11-07 in New York: 01:00 EDT (05:00 UTC) and 01:00 EST (06:00 UTC).
    assert fires_until("0 1-23/2 * * *", NEW_YORK, "2027-11-07 04:00", "2027-11-07 09:00") == [
        "2027-11-07 05:00", "2027-11-07 08:00",
    ]
    assert not CronSchedule.parse("0 1-23/2 * * *", NEW_YORK).follows_real_time


def test_names_and_sunday_as_seven() -> None:
    assert CronSchedule.parse("0 0 * JAN-mar Mon-FRI", "UTC").fields.weekdays == {1, 2, 3, 4, 5}
    assert CronSchedule.parse("0 0 * * 7", "UTC").fields.weekdays == {0}
    assert CronSchedule.parse("0 0 * * 5-7", "UTC").fields.weekdays == {5, 6, 0}


def test_an_out_of_range_number_names_the_field_and_its_range() -> None:
    with pytest.raises(CronError, match=r"^minute field: 61 is out of range 0-59$"):
        CronSchedule.parse("61 * * * *", "UTC")
    with pytest.raises(CronError, match=r"^day-of-week field: 8 is out of range 0-7$"):
        CronSchedule.parse("0 0 * * 8", "UTC")


@pytest.mark.parametrize(("expression", "field"), [
    ("0 0 15W * *", "day-of-month"), ("0 0 L * *", "day-of-month"),
    ("0 0 L3 * *", "day-of-month"), ("0 0 ? * 1", "day-of-month"),
    ("0 0 * * 5#2", "day-of-week"), ("0 0 13 * 5#2", "day-of-week"),
    ("0 0 * * 5L", "day-of-week"), ("H * * * *", "minute"),
])
def test_extensions_are_refused_naming_the_field(expression: str, field: str) -> None:
    with pytest.raises(CronError, match=rf"^{field} field: .* is not supported"):
        CronSchedule.parse(expression, "UTC")


@pytest.mark.parametrize(("expression", "zone"), [
    ("* * * *", "UTC"), ("* * * * * *", "UTC"), ("0 0 0 1 1 * 2027", "UTC"),
    ("0 0 30 2 *", "UTC"), ("0 10 * * *", "Mars/Olympus"), ("@reboot", "UTC"),
    ("@every 5m", "UTC"), ("5/2 * * * *", "UTC"), ("0 5-3 * * *", "UTC"),
    ("*/0 * * * *", "UTC"), ("0 0 0 * *", "UTC"), ("0 0 * 13 *", "UTC"), ("", "UTC"),
    ("1,,2 * * * *", "UTC"), ("0 24 * * *", "UTC"),
])
def test_what_cannot_be_scheduled_is_refused(expression: str, zone: str) -> None:
    with pytest.raises(CronError) as refused:
        CronSchedule.parse(expression, zone)
    assert "\n" not in str(refused.value)  # the API answers it as one 422 line


def test_six_or_seven_fields_are_refused_as_such() -> None:
    with pytest.raises(CronError, match="expected five fields .* got 6"):
        CronSchedule.parse("0 0 0 * * *", "UTC")


def test_macros_are_five_field_expressions() -> None:
    assert CronSchedule.parse("@daily", BERLIN).expression == "0 0 * * *"
    assert CronSchedule.parse("@WEEKLY", BERLIN).expression == "0 0 * * 0"
    assert CronSchedule.parse("@hourly", BERLIN).follows_real_time
    assert fires("@weekly", "UTC", "2027-03-22 00:00", 2) == [
        "2027-03-28 00:00", "2027-04-04 00:00",
    ]


# --- the oracle: classic cron decided minute by minute of real time -----------------

@dataclass(frozen=True)
class Classic:
    """An expression with the sets it means, built independently of the module."""

    text: str
    sets: tuple[frozenset[int], ...]  # minute, hour, day-of-month, month, day-of-week

    def matches(self, wall: datetime) -> bool:
        minute, hour, dom, month, dow = self.sets
        in_month, in_week = wall.day in dom, (wall.weekday() + 1) % 7 in dow
        fields = self.text.split()
        days = (in_month and in_week) if fields[2][0] == "*" or fields[4][0] == "*" \
            else (in_month or in_week)
        return wall.minute in minute and wall.hour in hour and wall.month in month and days

    @property
    def wild(self) -> bool:
        return self.text.split()[0][0] == "*" or self.text.split()[1][0] == "*"


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def oracle(job: Classic, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """Classic fires in ``(start, end]``: every real minute, judged by its wall time."""
    minute = start.replace(second=0, microsecond=0) - timedelta(hours=3)
    previous, seen, result = _wall(minute, zone), set(), []
    while (minute := minute + timedelta(minutes=1)) <= end:
        local = _wall(minute, zone)
        skipped = (local - previous) // timedelta(minutes=1) - 1
        gap = [previous + timedelta(minutes=i) for i in range(1, skipped + 1)]
        if job.wild:
            fire = job.matches(local)
        else:
            first = job.matches(local) and local not in seen
            fire = first or any(job.matches(w) for w in gap)
        if fire and minute > start:
            result.append(minute)
        seen.add(local)
        previous = local
    return result


def _values(low: int, high: int) -> st.SearchStrategy[tuple[str, frozenset[int]]]:
    """One list element: a number, a range (equal ends too), or a stepped range."""
    pair = st.tuples(st.integers(low, high), st.integers(low, high)).map(sorted)
    single = st.integers(low, high).map(lambda n: (str(n), frozenset({n})))
    ranged = pair.map(lambda p: (f"{p[0]}-{p[1]}", frozenset(range(p[0], p[1] + 1))))
    stepped = st.tuples(pair, st.integers(1, 12)).map(
        lambda x: (f"{x[0][0]}-{x[0][1]}/{x[1]}", frozenset(range(x[0][0], x[0][1] + 1, x[1]))))
    return st.one_of(single, ranged, stepped)


def _field(low: int, high: int) -> st.SearchStrategy[tuple[str, frozenset[int]]]:
    """A field: ``*``, ``*/n`` or a list of one to three elements."""
    star = st.just(("*", frozenset(range(low, high + 1))))
    star_step = st.integers(1, 12).map(
        lambda s: (f"*/{s}", frozenset(range(low, high + 1, s))))
    listed = st.lists(_values(low, high), min_size=1, max_size=3).map(
        lambda parts: (",".join(p[0] for p in parts), frozenset().union(*(p[1] for p in parts))))
    return st.one_of(star, star_step, listed)


def _sunday_as_zero(field: tuple[str, frozenset[int]]) -> tuple[str, frozenset[int]]:
    return field[0], frozenset(day % 7 for day in field[1])


MONTHS = st.sampled_from([("*", frozenset(range(1, 13))), ("1-12", frozenset(range(1, 13))),
                          ("*/1", frozenset(range(1, 13)))])
EXPRESSIONS: st.SearchStrategy[Classic] = st.tuples(
    _field(0, 59), _field(0, 23), _field(1, 31), MONTHS, _field(0, 7).map(_sunday_as_zero),
).map(lambda fs: Classic(" ".join(f[0] for f in fs), tuple(f[1] for f in fs)))
ZONES = [BERLIN, NEW_YORK, "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham"]


@cache
def transitions(zone_name: str) -> tuple[datetime, ...]:
    """Instants in 2026-2028 where the zone's offset changes (to the hour)."""
    zone, begin = ZoneInfo(zone_name), datetime(2026, 1, 1, tzinfo=UTC)
    hours = [begin + timedelta(hours=h) for h in range(3 * 366 * 24)]
    return tuple(b for a, b in zip(hours, hours[1:], strict=False)
                 if a.astimezone(zone).utcoffset() != b.astimezone(zone).utcoffset())


def _fires_between(schedule: CronSchedule, start: datetime, end: datetime) -> list[datetime]:
    got = []
    for fire in schedule.iter_after(start):
        if fire > end:
            break
        got.append(fire)
    return got


@settings(max_examples=200, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), st.data())
def test_fires_match_the_oracle_around_the_dst_changes_of_2026_to_2028(
    job: Classic, zone_name: str, data: st.DataObject,
) -> None:
    change = data.draw(st.sampled_from(transitions(zone_name)))
    start = change - timedelta(minutes=data.draw(st.integers(0, 36 * 60)), seconds=30)
    end = change + timedelta(hours=data.draw(st.integers(1, 36)))
    schedule = CronSchedule.parse(job.text, zone_name)
    assert schedule.follows_real_time == job.wild
    assert _fires_between(schedule, start, end) == oracle(job, ZoneInfo(zone_name), start, end)


def test_the_oracle_sees_every_zone_change_twice_a_year() -> None:
    assert all(len(transitions(zone)) == 6 for zone in ZONES)

