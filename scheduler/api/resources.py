"""What the API holds open while it runs, built from settings in the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import redis
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from scheduler.api.auth import Authenticator

Clock = Callable[[], datetime]

log = logging.getLogger("stellwerk.api")


@dataclass(frozen=True)
class Resources:
    """Connections, clock and authenticator shared by all requests of one app."""

    engine: Engine
    sessions: sessionmaker[Session]
    redis: redis.Redis
    relay: OutboxRelay
    authenticator: Authenticator
    clock: Clock

    @classmethod
    def open(cls, settings: Settings, clock: Clock = utcnow) -> Resources:
        """Build everything from settings; nothing connects until first used."""
        database_url, redis_url = settings.require_urls()
        engine = make_engine(database_url)
        sessions = make_sessions(engine)
        client = redis.Redis.from_url(redis_url)
        return cls(
            engine=engine, sessions=sessions, redis=client,
            relay=OutboxRelay(sessions, Publisher(client)),
            authenticator=Authenticator(settings.admin_token), clock=clock,
        )

    def relay_now(self, outbox_ids: Sequence[int]) -> None:
        """Publish committed outbox rows at once, so that a run-now run starts now.

        A failure is logged, not raised: the rows are committed, and the beat's relay
        sends whatever is left, so the request has succeeded either way.
        """
        try:
            self.relay.relay_ids(outbox_ids)
        except Exception:
            log.exception("relaying outbox rows %s failed; the beat will send them", outbox_ids)

    def close(self) -> None:
        """Release the connection pools."""
        self.redis.close()
        self.engine.dispose()
