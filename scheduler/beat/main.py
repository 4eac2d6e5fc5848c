"""``stellwerk beat``: composition of the timer process."""

from __future__ import annotations

from datetime import timedelta

import redis
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.health import health_dir
from common.messaging.claims import ClaimHolders
from common.messaging.epoch import current_epoch
from common.messaging.loop_timings import LoopTimings
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from scheduler.beat import duties, lateness, suspension
from scheduler.beat.attempts import ExpiredLeases, LostClaims
from scheduler.beat.flow import AdmitWaiting, adopt_for_new_limits
from scheduler.beat.retention import Retention
from scheduler.beat.ticker import Chore, Duty, Ticker, WhenDue
from scheduler.service import configure_logging, run_until_signalled


def build_ticker(settings: Settings) -> Ticker:
    """Wire the beat's parts from settings."""
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pool_size=2))
    client = redis.Redis.from_url(redis_url)
    publisher = Publisher(client)
    relay = OutboxRelay(sessions, publisher, settings.dispatch_bundle_size)
    return Ticker(
        sessions, relay, settings.beat_interval, clock=utcnow, cancel_grace=settings.cancel_grace,
        fire_crons=not settings.disable_cron, watch=watch_duties(client, settings),
        timings=LoopTimings(client, "beat_step"), ping_redis=client.ping,
        chores=chores(sessions, settings),
    )


def chores(sessions: sessionmaker[Session], settings: Settings) -> list[Chore]:
    """Retention, unless ``STELLWERK_RETENTION_DAYS`` is 0."""
    if settings.retention is None:
        return []
    return [Retention(sessions, settings.retention, settings.retention_keep_runs)]


def watch_duties(client: redis.Redis, settings: Settings) -> list[Duty]:
    """Lost workers' attempts, task timeouts, suspension, late runs, flow control."""
    holders = ClaimHolders(client)

    def epoch_age() -> timedelta:
        return current_epoch(client).age()

    return [
        WhenDue("leases", ExpiredLeases(holders, settings.lease_ttl, epoch_age)),
        WhenDue("claims", LostClaims(holders, settings.lease_ttl, epoch_age)),
        WhenDue("attempt_timeouts", duties.time_out_attempts),
        WhenDue("suspend", suspension.suspend_due_runs),
        WhenDue("resume", suspension.resume_due_runs),
        WhenDue("late", lateness.announce_late_runs),
        WhenDue("new_limits", adopt_for_new_limits),
        WhenDue("flow", AdmitWaiting()),
    ]


def run_beat(settings: Settings) -> None:
    """Tick until SIGTERM or SIGINT."""
    configure_logging("beat")
    run_until_signalled("beat", build_ticker(settings), health_dir=health_dir(settings.data_dir))
