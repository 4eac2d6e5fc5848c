"""The worker's liveness record for ``GET /processors`` (read by ``common.messaging.liveness``).

A background thread rewrites ``stellwerk:workers:<hostname>`` every few seconds with a
TTL a few times longer, so a worker that dies without cleaning up drops out of the
list within the TTL; one that stops cleanly deletes its key at once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import TracebackType

import redis

from common.messaging.liveness import LIVENESS_REFRESH, LIVENESS_TTL, worker_key
from common.messaging.messages import utcnow

logger = logging.getLogger(__name__)


class LivenessBeacon:
    """Keeps this worker's record alive while the context manager is open."""

    def __init__(
        self,
        client: redis.Redis,
        hostname: str,
        types: Sequence[str],
        concurrency: int,
        *,
        refresh: timedelta = LIVENESS_REFRESH,
        ttl: timedelta = LIVENESS_TTL,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._client = client
        self._key = worker_key(hostname)
        self._record = {
            "hostname": hostname,
            "types": sorted(types),
            "concurrency": concurrency,
            "pid": os.getpid(),
            "started_at": clock().isoformat(),
        }
        self._refresh_s = refresh.total_seconds()
        self._ttl = ttl
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)

    def __enter__(self) -> LivenessBeacon:
        """Write the record now, then keep refreshing it."""
        self._write()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop refreshing and remove the record."""
        self._stop.set()
        self._thread.join()
        try:
            self._client.delete(self._key)
        except redis.RedisError:
            logger.warning("could not remove the liveness record %s; it expires", self._key)

    def _run(self) -> None:
        while not self._stop.wait(self._refresh_s):
            try:
                self._write()
            except redis.RedisError:
                logger.warning("could not refresh the liveness record %s", self._key)

    def _write(self) -> None:
        record = {**self._record, "seen_at": self._clock().isoformat()}
        self._client.set(self._key, json.dumps(record), ex=self._ttl)
