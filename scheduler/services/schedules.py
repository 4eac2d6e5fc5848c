"""Checks on a job's schedule, with the parser the beat fires it with.

Whatever passes here is what :mod:`common.domain.cron` can schedule (five fields, a
known zone), so a job that was accepted never fails to fire.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.domain.cron import CronError, CronSchedule
from common.domain.spec import Schedule
from scheduler.services.errors import InvalidInput


def check_schedule(schedule: Schedule) -> None:
    """Raise :class:`InvalidInput` naming the field if the zone or cron expression is bad."""
    try:
        ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise InvalidInput(
            ("body", "schedule", "timezone"),
            f"unknown time zone {schedule.timezone!r} (use an IANA name like 'Europe/Berlin')",
        ) from error
    if schedule.cron is None:
        return
    try:
        CronSchedule.parse(schedule.cron, schedule.timezone)
    except CronError as error:
        raise InvalidInput(
            ("body", "schedule", "cron"),
            f"{error} (e.g. '0 10 * * *': minute hour day-of-month month day-of-week)",
        ) from error
