"""The worker's Celery application: ``stellwerk.execute`` and its bundled form.

Each ``tasks.<type>`` queue carries ``stellwerk.execute`` messages whose single argument
is a ``TaskDispatch``, and ``stellwerk.execute_bundle`` messages carrying several;
which types a worker serves is decided by the queues it consumes (see
``workers.main``), not by the task name.
"""

from __future__ import annotations

import socket
from typing import Any

import redis
from celery import Celery, Task

from common.config import Settings
from common.messaging.celery_app import make_celery
from common.messaging.holdings import Holdings
from common.messaging.messages import EXECUTE_BUNDLE_TASK, EXECUTE_TASK
from common.messaging.publisher import Publisher
from common.secure_params import SecretBox
from workers.executor import Executor
from workers.registry import Registry
from workers.request import AckOnceRequest


def require_redis_url(settings: Settings) -> str:
    """The Redis URL, which a worker cannot run without."""
    if not settings.redis_url:
        raise RuntimeError("STELLWERK_REDIS_URL is not set: the worker needs the broker")
    return settings.redis_url


def build_worker_app(
    settings: Settings, registry: Registry, holdings: Holdings | None = None
) -> Celery:
    """A Celery app whose ``stellwerk.execute`` runs dispatches with ``registry``.

    ``holdings`` is the worker's memory of its claims and outcomes; its liveness
    beacon must refresh it (``workers.main``).
    """
    redis_url = require_redis_url(settings)
    app = make_celery(redis_url, name="stellwerk-worker")
    client = redis.Redis.from_url(redis_url)
    publisher = Publisher(client)
    executor = Executor(
        registry,
        client,
        publisher,
        heartbeat_interval=settings.heartbeat_interval,
        spill_after=settings.bundle_spill_after,
        secrets=SecretBox(settings.secret_key),
        holdings=holdings or Holdings(client, publisher),
    )
    fallback_name = socket.gethostname()

    @app.task(name=EXECUTE_TASK, bind=True, ignore_result=True, Request=AckOnceRequest)
    def execute(self: Task[Any, Any], payload: object) -> None:
        executor.handle(payload, worker=self.request.hostname or fallback_name)

    @app.task(name=EXECUTE_BUNDLE_TASK, bind=True, ignore_result=True, Request=AckOnceRequest)
    def execute_bundle(self: Task[Any, Any], payload: object) -> None:
        executor.handle_bundle(payload, worker=self.request.hostname or fallback_name)

    return app
