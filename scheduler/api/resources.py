"""What the API holds open while it runs, built from settings in the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import orjson
import psycopg
import redis
from psycopg import AsyncConnection
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool
from pydantic import SecretStr
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

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
T = TypeVar("T")
# The ``application_name`` of the reads' connections (``pg_stat_activity`` tells them).
READS_APPLICATION = "stellwerk-api-reads"
# How long a read waits for a connection of its pool. Reads take a millisecond each, so
# this is only reached while PostgreSQL cannot be reached: the pool keeps trying in the
# background, and the read fails (503) after this, as a sync route's fails at once.
READS_WAIT = timedelta(seconds=5)


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
    # Connections for the reads that run on the event loop (a job, a run): no request
    # thread, no Session. Opened and closed by the app's lifespan (:meth:`open_reads`).
    reads: AsyncConnectionPool[AsyncConnection[Any]]

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
            reads=AsyncConnectionPool(
                database_url, min_size=1, max_size=pool_size, open=False,
                timeout=READS_WAIT.total_seconds(),
                kwargs={"autocommit": True, "application_name": READS_APPLICATION},
                configure=_orjson_reads,
            ),
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

    async def served_now(self) -> frozenset[str] | None:
        """:attr:`served_types` for a route on the event loop.

        A Redis read (when what was read is stale) goes to a request thread, so that a
        slow Redis stalls no loop.
        """
        if self.served_types.would_read():
            return await run_in_threadpool(self.served_types)
        return self.served_types()

    async def open_reads(self) -> None:
        """Open the event loop's pool (in the lifespan: it needs the running loop)."""
        await self.reads.open()

    async def close_reads(self) -> None:
        """Close the event loop's pool."""
        await self.reads.close()

    async def read(self, query: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``query`` on a connection of :attr:`reads`; once more if the connection broke.

        Nothing checks a pooled connection before it is lent (a round trip each time).
        After a PostgreSQL restart every idle one is broken: the first read that meets
        one has the pool test them all (dropping the broken) and tries again, as the
        Sessions' pre-ping would have done.
        """
        async with self.reads.connection() as conn:
            try:
                return await query(conn)
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
        await self.reads.check()
        async with self.reads.connection() as conn:
            return await query(conn)

    def close(self) -> None:
        """Release the connection pools."""
        self.redis.close()
        self.engine.dispose()


async def _orjson_reads(conn: AsyncConnection[Any]) -> None:
    """``jsonb`` read with orjson, as the Sessions' engine does (``make_engine``)."""
    set_json_loads(orjson.loads, conn)
