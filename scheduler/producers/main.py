"""Composition of the ``stellwerk.jobs`` consumer (run by ``stellwerk notify``)."""

from __future__ import annotations

import redis

from common.config import Settings
from common.messaging.celery_app import make_celery
from common.messaging.messages import JOBS_QUEUE, utcnow
from common.messaging.publisher import Publisher
from common.messaging.reliable import BatchReader, default_owner
from common.persistence.db import make_engine, make_sessions
from common.persistence.outbox import OutboxRelay
from common.secure_params import SecretBox
from scheduler.engine.commands import RunControl
from scheduler.engine.loading import RunLoader
from scheduler.engine.stopper import Stopper
from scheduler.engine.structure import StructureCache
from scheduler.producers.consumer import RequestConsumer
from scheduler.producers.handler import ACTOR, RequestHandler
from scheduler.services.limits import Limits


def build_request_consumer(settings: Settings) -> RequestConsumer:
    """Wire the consumer from settings: the API's limits and secret key, the engine's cancel."""
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pool_size=2))
    # A Redis that stops answering is an outage, not a hang (the take blocks for 1 s).
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=2.0, socket_timeout=10.0)
    relay = OutboxRelay(sessions, Publisher(client), settings.dispatch_bundle_size)
    control = RunControl(
        sessions, RunLoader(StructureCache()), relay,
        Stopper(client, make_celery(redis_url)), lease_ttl=settings.lease_ttl, clock=utcnow,
    )
    handler = RequestHandler(
        limits=Limits.of(settings), secrets=SecretBox(settings.secret_key),
        egress=settings.egress,
        cancel_run=lambda run_id: control.run_action(run_id, "cancel", ACTOR),
    )
    reader = BatchReader(client, [JOBS_QUEUE], owner=f"producers-{default_owner()}")
    return RequestConsumer(reader, sessions, handler, relay, utcnow)
