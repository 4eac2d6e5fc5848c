"""Telling running attempts to stop: a cancel flag the worker polls, and a revoke."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import redis
from celery import Celery

CANCEL_KEY = "stellwerk:cancel:{key}"
CANCEL_KEY_TTL = timedelta(days=1)


class Stopper:
    """Best effort by design: an attempt that keeps running has its result ignored."""

    def __init__(self, client: redis.Redis, app: Celery) -> None:
        self._client = client
        self._app = app

    def stop(self, keys: Sequence[str]) -> None:
        """Set the cancel flags of ``keys`` (idempotency keys) and revoke their messages."""
        if not keys:
            return
        with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(CANCEL_KEY.format(key=key), "1", ex=CANCEL_KEY_TTL)
            pipe.execute()
        self._app.control.revoke(list(keys), terminate=True, signal="SIGTERM")
