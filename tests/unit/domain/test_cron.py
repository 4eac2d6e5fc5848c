"""Cron fire times with classic-cron DST: examples of 2027 and properties against an oracle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
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


def test_croniter_alone_would_fire_the_repeated_wall_time_twice() -> None:
    """Why this module exists: guards against a croniter that changes its mind."""
    walls = croniter("30 2 * * *", datetime(2027, 10, 29, 12, tzinfo=ZoneInfo(BERLIN)))
    naive = [walls.get_next(datetime).astimezone(UTC) for _ in range(3)]
    ours = CronSchedule.parse("30 2 * * *", BERLIN).fires_after(utc("2027-10-29 10:00"), 3)
    assert naive != ours


def test_several_skipped_wall_times_make_one_fire() -> None:
    assert fires("0,30 2-3 * * *", BERLIN, "2027-03-27 23:00", 3) == [
        "2027-03-28 01:00", "2027-03-28 01:30", "2027-03-29 00:00",
    ]


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


@pytest.mark.parametrize(("expression", "zone"), [
    ("* * * *", "UTC"), ("* * * * * *", "UTC"), ("61 * * * *", "UTC"), ("0 0 30 2 *", "UTC"),
    ("0 10 * * *", "Mars/Olympus"), ("@reboot", "UTC"),
])
def test_what_cannot_be_scheduled_is_refused(expression: str, zone: str) -> None:
    with pytest.raises(CronError):
        CronSchedule.parse(expression, zone)


def test_macros_are_five_field_expressions() -> None:
    assert CronSchedule.parse("@daily", BERLIN).expression == "0 0 * * *"
    assert CronSchedule.parse("@hourly", BERLIN).follows_real_time


# --- properties, against a brute-force oracle over every minute of real time ------

ZONES = [BERLIN, NEW_YORK, "Australia/Lord_Howe", "Pacific/Chatham", "America/Sao_Paulo",
         "Asia/Kolkata", "UTC"]


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    single = st.integers(low, high).map(str)
    ranged = st.tuples(st.integers(low, high), st.integers(low, high)).map(
        lambda p: f"{min(p)}-{max(p)}")
    return st.one_of(st.just("*"), st.integers(2, 30).map(lambda s: f"*/{s}"), single, ranged,
                     st.lists(single, min_size=2, max_size=3, unique=True).map(",".join))


EXPRESSIONS = st.tuples(_field(0, 59), _field(0, 23), st.sampled_from(["*", "1-31", "*/2"]),
                        st.just("*"), st.sampled_from(["*", "0-6", "1-5"])).map(" ".join)


def _transitions(zone: ZoneInfo, year: int) -> list[datetime]:
    """Instants in ``year`` where the zone's offset changes (to the hour)."""
    hours = [datetime(year, 1, 1, tzinfo=UTC) + timedelta(hours=h) for h in range(366 * 24)]
    return [b for a, b in zip(hours, hours[1:], strict=False)
            if a.astimezone(zone).utcoffset() != b.astimezone(zone).utcoffset()]


def _oracle(expression: str, zone: ZoneInfo, start: datetime, end: datetime,
            real_time: bool) -> list[datetime]:
    """Classic-cron fires in ``(start, end]``, by walking every minute of real time."""
    wall = start.astimezone(zone).replace(tzinfo=None) - timedelta(hours=4)
    matching = set()
    walls = croniter(expression, wall)
    while (w := walls.get_next(datetime)) <= end.astimezone(zone).replace(tzinfo=None) \
            + timedelta(hours=4):
        matching.add(w)
    seen, result = set(), []
    minute = start.replace(second=0, microsecond=0) - timedelta(hours=4)
    previous_wall = minute.astimezone(zone).replace(tzinfo=None)
    while (minute := minute + timedelta(minutes=1)) <= end:
        local = minute.astimezone(zone).replace(tzinfo=None, fold=0)
        skipped = {w for w in matching if previous_wall < w < local} \
            if local - previous_wall > timedelta(minutes=1) else set()
        hit = local in matching and (real_time or local not in seen)
        if (hit or (skipped and not real_time)) and minute > start:
            result.append(minute)
        seen.add(local)
        previous_wall = local
    return result


@settings(max_examples=40, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), st.integers(2017, 2028), st.data())
def test_fires_match_the_oracle_around_clock_changes(
    expression: str, zone_name: str, year: int, data: st.DataObject,
) -> None:
    zone = ZoneInfo(zone_name)
    changes = _transitions(zone, year) or [datetime(year, 6, 1, tzinfo=UTC)]
    change = data.draw(st.sampled_from(changes))
    start = change - timedelta(minutes=data.draw(st.integers(0, 6 * 60)))
    end = change + timedelta(hours=3)
    schedule = CronSchedule.parse(expression, zone_name)
    got = []
    for fire in schedule.iter_after(start):
        if fire > end:
            break
        got.append(fire)
    assert got == _oracle(expression, zone, start, end, schedule.follows_real_time)


@settings(max_examples=40, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), st.integers(2017, 2028), st.data())
def test_fires_increase_and_fixed_times_never_fire_a_wall_time_twice(
    expression: str, zone_name: str, year: int, data: st.DataObject,
) -> None:
    zone = ZoneInfo(zone_name)
    changes = _transitions(zone, year) or [datetime(year, 1, 1, tzinfo=UTC)]
    start = data.draw(st.sampled_from(changes)) - timedelta(hours=3)
    schedule = CronSchedule.parse(expression, zone_name)
    got = schedule.fires_after(start, 100)
    assert all(a < b for a, b in zip(got, got[1:], strict=False))
    assert all(f > start and f.tzinfo is UTC for f in got)
    walls = [f.astimezone(zone).replace(tzinfo=None, fold=0) for f in got]
    if not schedule.follows_real_time:
        assert len(set(walls)) == len(walls)
    for fire, wall in zip(got, walls, strict=True):
        matches = croniter.match(schedule.expression, wall)
        after_gap = (fire - timedelta(minutes=1)).astimezone(zone).utcoffset() \
            != fire.astimezone(zone).utcoffset()
        assert matches or (after_gap and not schedule.follows_real_time)
