"""Telling running attempts to stop: a cancel flag the worker polls, and a revoke."""

from __future__ import annotations

from collections.abc import Sequence

import redis
from celery import Celery

from common.messaging.keys import CLAIM_TTL, cancel_key


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
                pipe.set(cancel_key(key), "1", ex=CLAIM_TTL)
            pipe.execute()
        self._app.control.revoke(list(keys), terminate=True, signal="SIGTERM")
