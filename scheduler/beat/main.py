"""``stellwerk beat``: composition of the timer process."""

from __future__ import annotations

import redis

from common.config import Settings
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from scheduler.beat.ticker import Ticker
from scheduler.service import run_until_signalled


def build_ticker(settings: Settings) -> Ticker:
    """Wire the beat's parts from settings."""
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pool_size=2))
    publisher = Publisher(redis.Redis.from_url(redis_url))
    relay = OutboxRelay(sessions, publisher, settings.dispatch_bundle_size)
    return Ticker(sessions, relay, settings.beat_interval, clock=utcnow)


def run_beat(settings: Settings) -> None:
    """Tick until SIGTERM or SIGINT."""
    run_until_signalled("beat", build_ticker(settings))
