"""``stellwerk engine``: composition of the engine process."""

from __future__ import annotations

from functools import partial

import redis
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.health import health_dir
from common.messaging.celery_app import make_celery
from common.messaging.loop_timings import LoopTimings
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.messaging.reliable import BatchReader, default_owner
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from scheduler.engine.batch import BatchApplier, BatchOutcome
from scheduler.engine.consumer import ENGINE_QUEUES, EngineConsumer, OutageHooks
from scheduler.engine.flow_gate import FlowGate
from scheduler.engine.loading import RunLoader
from scheduler.engine.repair import Repair, resend_lost
from scheduler.engine.stopper import Stopper
from scheduler.engine.structure import StructureCache
from scheduler.service import Together, configure_logging, run_until_signalled


def build_consumer(settings: Settings) -> EngineConsumer:
    """Wire the engine's parts from settings."""
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pre_ping=False, driver_prepares=False))
    client = redis.Redis.from_url(redis_url)
    relay = OutboxRelay(sessions, Publisher(client), settings.dispatch_bundle_size)
    applier = BatchApplier(
        sessions, RunLoader(StructureCache()), relay, settings.lease_ttl, clock=utcnow,
        flow=FlowGate(give_back=settings.bundle_spill_after),
    )
    stopper = Stopper(client, make_celery(redis_url))

    def after_batch(outcome: BatchOutcome) -> None:
        stopper.stop(outcome.stops)

    reader = BatchReader(client, ENGINE_QUEUES, owner=f"engine:{default_owner()}")
    return EngineConsumer(
        reader,
        applier,
        batch_size=settings.engine_batch_size,
        linger=settings.engine_batch_wait,
        on_outcome=after_batch,
        timings=LoopTimings(client, "engine_batch"),
        hooks=OutageHooks(
            after_redis_outage=lambda: _relay_all(relay), ping_database=lambda: _ping(sessions)
        ),
    )


def _relay_all(relay: OutboxRelay) -> None:
    relay.relay_pending()


def _ping(sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        session.execute(text("SELECT 1"))


def build_repair(settings: Settings) -> Repair:
    """The repair loop: what a crash or an empty Redis lost, sent again."""
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pool_size=1))
    client = redis.Redis.from_url(redis_url)
    relay = OutboxRelay(sessions, Publisher(client), settings.dispatch_bundle_size)
    stopper = Stopper(client, make_celery(redis_url))
    return Repair(partial(resend_lost, sessions, relay, client, stopper.stop, utcnow), client)


def run_engine(settings: Settings) -> None:
    """Consume activations and results, and repair, until SIGTERM or SIGINT."""
    configure_logging("engine")  # before the loops are built: nothing they log is lost
    loops = Together([build_consumer(settings), build_repair(settings)])
    run_until_signalled("engine", loops, health_dir=health_dir(settings.data_dir))
