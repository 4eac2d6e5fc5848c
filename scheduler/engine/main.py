"""``stellwerk engine``: composition of the engine process."""

from __future__ import annotations

import redis

from common.config import Settings
from common.messaging.celery_app import make_celery
from common.messaging.loop_timings import LoopTimings
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.messaging.reliable import BatchReader, default_owner
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from scheduler.engine.batch import BatchApplier, BatchOutcome
from scheduler.engine.consumer import ENGINE_QUEUES, EngineConsumer
from scheduler.engine.loading import RunLoader
from scheduler.engine.repair import repair_on_start
from scheduler.engine.stopper import Stopper
from scheduler.engine.structure import StructureCache
from scheduler.service import run_until_signalled


def build_consumer(settings: Settings) -> EngineConsumer:
    """Wire the engine's parts from settings."""
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pre_ping=False))
    client = redis.Redis.from_url(redis_url)
    relay = OutboxRelay(sessions, Publisher(client), settings.dispatch_bundle_size)
    relay.relay_pending()  # repair: what a crash left in the outbox goes out first
    repair_on_start(sessions, relay, client, utcnow)  # then half-done transitions
    applier = BatchApplier(
        sessions, RunLoader(StructureCache()), relay, settings.lease_ttl, clock=utcnow
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
    )


def run_engine(settings: Settings) -> None:
    """Consume activations and results until SIGTERM or SIGINT."""
    run_until_signalled("engine", build_consumer(settings))
