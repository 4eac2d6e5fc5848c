"""Checks on a job's schedule that need libraries the domain core does not import."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

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
    if schedule.cron is not None and not croniter.is_valid(schedule.cron):
        raise InvalidInput(
            ("body", "schedule", "cron"),
            f"{schedule.cron!r} is not a valid cron expression (e.g. '0 10 * * *')",
        )
