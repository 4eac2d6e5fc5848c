"""``stellwerk worker``: a Celery worker serving the queues of some task types.

The CLI builds the settings and calls :func:`run_worker`; everything the worker needs
is built here, in this process, and nothing at import time.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
from collections.abc import Sequence

import redis
from celery import Celery
from celery.apps.worker import Worker
from celery.signals import after_setup_logger
from celery.utils.nodenames import default_nodename

import workers.builtin  # noqa: F401 - registers the built-in processors
from common.config import Settings
from common.health import StatusWriter, health_dir
from common.messaging.holdings import Holdings
from common.messaging.liveness import LivenessBeacon
from common.messaging.messages import task_queue
from common.messaging.publisher import Publisher
from common.outage import Outage
from common.process import settle_garbage_collector
from workers.broker_connection import steady_consumer
from workers.pool import CooperativeThreadPool
from workers.registry import default_registry
from workers.runtime import build_worker_app, require_redis_url

logger = logging.getLogger(__name__)


def run_worker(
    settings: Settings,
    types: list[str],
    concurrency: int = 16,
    pool: str = "threads",
    hostname: str | None = None,
    *,
    imports: Sequence[str] = (),
) -> None:
    """Serve ``tasks.<type>`` for each of ``types`` until the worker is stopped.

    ``imports`` names modules of user processors to import first (their
    ``@processor`` decorators register them). A thread pool is the default so that a
    few long ``sleep`` or ``shell`` tasks never block the others.
    """
    for module in imports:
        importlib.import_module(module)
    if not types:
        raise ValueError("a worker needs at least one task type to serve")
    default_registry.require(types)
    redis_url = require_redis_url(settings)
    # Normalised as Celery will ("host" → "celery@host"), so that the liveness record
    # and the results name the worker alike.
    hostname = default_nodename(hostname or f"worker-{os.getpid()}@{socket.gethostname()}")
    client = redis.Redis.from_url(redis_url)
    holdings = Holdings(client, Publisher(client))
    app = build_worker_app(settings, default_registry, holdings)
    after_setup_logger.connect(_quiet_per_task_logs, weak=False)
    broker = Outage("Redis", logger)
    worker = _celery_worker(app, hostname, broker, types, concurrency=concurrency, pool=pool)
    logger.info("%s serving %s with %d %s", hostname, ", ".join(types), concurrency, pool)
    if settings.secret_key is None:
        logger.warning("STELLWERK_SECRET_KEY is not set: tasks with secure params will FAIL here")
    settle_garbage_collector()
    with (
        StatusWriter(health_dir(settings.data_dir), "worker", lambda: [broker]),
        LivenessBeacon(client, hostname, types, concurrency,
                       on_refresh=lambda: holdings.refresh(hostname)),
    ):
        worker.start()
    if worker.exitcode:
        raise SystemExit(worker.exitcode)


def _celery_worker(
    app: Celery, hostname: str, broker: Outage, types: Sequence[str], *, concurrency: int,
    pool: str,
) -> Worker:
    """Celery's worker with what Stellwerk does not use turned off.

    One message prefetched per slot (a long task must not hold others back); no gossip,
    mingle, heartbeats or task events: liveness is Stellwerk's own record.
    """
    return app.Worker(
        hostname=hostname,
        consumer_cls=steady_consumer(broker),
        queues=[task_queue(task_type) for task_type in types],
        pool=CooperativeThreadPool if pool == "threads" else pool,
        concurrency=concurrency,
        prefetch_multiplier=1,
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
        task_events=False,
        loglevel="INFO",
        redirect_stdouts=False,
        quiet=True,
    )


def _quiet_per_task_logs(**_: object) -> None:
    """Celery logs two INFO lines per task ("received", "succeeded").

    At hundreds of tasks a second that is a measurable share of the worker's CPU; the
    runtime logs what matters about an attempt itself, with its run id, task and attempt.
    """
    for name in ("celery.app.trace", "celery.worker.strategy"):
        logging.getLogger(name).setLevel(logging.WARNING)
