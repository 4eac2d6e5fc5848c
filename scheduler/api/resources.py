"""What the API holds open while it runs, built from settings in the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import redis
from pydantic import SecretStr
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.egress import EgressPolicy
from common.messaging.celery_app import make_celery
from common.messaging.liveness import live_workers
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from common.secure_params import SecretBox
from scheduler.api.auth import Authenticator
from scheduler.engine.commands import RunControl
from scheduler.engine.loading import RunLoader
from scheduler.engine.reported import Reports
from scheduler.engine.stopper import Stopper
from scheduler.engine.structure import StructureCache
from scheduler.services.serving import ServedTypes

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
    control: RunControl
    # Seals secure params on create and PATCH; the API never returns them.
    secrets: SecretBox
    # Post-backs and web-service callbacks, applied as the engine would; callback URLs
    # carry a credential derived from the secret key (``common.callbacks``).
    reports: Reports
    callback_key: SecretStr | None
    # The task types live workers serve, for the "no worker serves type X" warnings.
    served_types: ServedTypes
    # Targets refused when written, where the policy can judge them without a lookup.
    egress: EgressPolicy

    @classmethod
    def open(cls, settings: Settings, clock: Clock = utcnow, pool_size: int = 5) -> Resources:
        """Build everything from settings; nothing connects until first used."""
        database_url, redis_url = settings.require_urls()
        engine = make_engine(database_url, pool_size=pool_size)
        sessions = make_sessions(engine)
        client = redis.Redis.from_url(redis_url)
        relay = OutboxRelay(sessions, Publisher(client), settings.dispatch_bundle_size)
        # The API never caches run snapshots (the loader is not told to remember):
        # engines write the same runs, and only their own cache is keyed by version.
        stopper = Stopper(client, make_celery(redis_url))
        control = RunControl(
            sessions, RunLoader(StructureCache()), relay, stopper,
            lease_ttl=settings.lease_ttl, clock=clock,
        )
        reports = Reports(
            sessions, RunLoader(StructureCache()), relay, stopper,
            lease_ttl=settings.lease_ttl, clock=clock,
        )
        return cls(
            engine=engine, sessions=sessions, redis=client, relay=relay,
            authenticator=Authenticator(settings.admin_token), clock=clock, control=control,
            secrets=SecretBox(settings.secret_key), reports=reports,
            callback_key=settings.secret_key,
            served_types=ServedTypes(lambda: live_workers(client)),
            egress=settings.egress,
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
