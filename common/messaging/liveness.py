"""Which workers are alive now, as their own Redis records say (``GET /processors``).

Each running worker keeps one short-lived key, ``stellwerk:workers:<hostname>``, holding
a JSON record (``hostname``, ``types``, ``concurrency``, ``pid``, ``started_at``,
``seen_at``). It refreshes the key well inside its TTL, so a worker that dies vanishes
from the list within the TTL without anyone cleaning up after it; one that stops cleanly
deletes its key at once. Its hostname is also a member of one sorted set, the index
(``stellwerk:worker-index``), so that readers find the records without scanning the
keyspace: a SCAN reads every key of the database (24 h of attempt claims on a busy
one: 20,000 keys after one benchmark made each API read of the workers 40 round trips).
A member's score is when its writer last wrote it; writers drop members not written for
a minute, and readers skip members whose record has expired.

Writer (:class:`LivenessBeacon`, kept by every worker and connector) and reader
(:func:`live_workers`, for the API and the beat) live here together, so that the API
reads them without importing a runtime.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, cast

import redis

from common.messaging.messages import utcnow
from common.outage import Outage

logger = logging.getLogger(__name__)

WORKER_KEY_PREFIX = "stellwerk:workers:"
# A worker that dies drops out within the TTL; the beat requeues its attempts then
# (``scheduler.beat.attempts``), so the TTL bounds how long a dead worker's attempts
# wait. Three refreshes fit in it: a worker busy enough to miss one is not taken for dead.
LIVENESS_TTL = timedelta(seconds=6)
LIVENESS_REFRESH = timedelta(seconds=2)
WORKER_INDEX = "stellwerk:worker-index"
# Index members not rewritten for this long are dropped by the next writer: much longer
# than the TTL, so that a writer whose clock is behind others' is not dropped while live.
INDEX_KEEP = timedelta(minutes=1)


def worker_key(hostname: str) -> str:
    """The Redis key of one worker's liveness record."""
    return f"{WORKER_KEY_PREFIX}{hostname}"


def live_workers(client: redis.Redis) -> list[dict[str, Any]]:
    """The records of the workers alive now, sorted by hostname.

    A record that expires between the index's read and its own, or holds something that is not
    a JSON object, is left out rather than reported as a worker.
    """
    names = [_text(name) for name in cast(list[bytes], client.zrange(WORKER_INDEX, 0, -1))]
    if not names:
        return []
    records: list[dict[str, Any]] = []
    for raw in client.mget([worker_key(name) for name in names]):
        record = _parse(raw)
        if record is not None:
            records.append(record)
    return sorted(records, key=lambda record: str(record.get("hostname", "")))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parse(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, bytes | str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class LivenessBeacon:
    """Keeps a worker's (or connector's) record alive while the context manager is open.

    A background thread rewrites the record every ``refresh``, with a TTL a few times
    longer: a process that dies without cleaning up drops out within the TTL.
    """

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
        on_refresh: Callable[[], None] | None = None,
    ) -> None:
        """``on_refresh`` runs after each rewrite, on the beacon's thread (see ``Holdings``)."""
        self._client = client
        self._on_refresh = on_refresh
        self._outage = Outage("Redis", logger)
        self._hostname = hostname
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
        """Write the record now (if Redis answers), then keep refreshing it."""
        self._refresh()
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
            with self._client.pipeline(transaction=False) as pipe:
                pipe.delete(self._key)
                pipe.zrem(WORKER_INDEX, self._hostname)
                pipe.execute()
        except redis.RedisError:
            logger.warning("could not remove the liveness record %s; it expires", self._key)

    def _run(self) -> None:
        while not self._stop.wait(self._refresh_s):
            self._refresh()

    def _refresh(self) -> None:
        try:
            self._write()
        except redis.RedisError as error:
            self._outage.failed(error)
            return
        self._outage.succeeded()
        self._refreshed()

    def _refreshed(self) -> None:
        if self._on_refresh is None:
            return
        try:
            self._on_refresh()
        except redis.RedisError as error:
            logger.warning("refresh of %s's holdings failed: %s", self._key, error)
        except Exception:  # the beacon must go on whatever its hook does
            logger.exception("refresh of %s's holdings failed", self._key)

    def _write(self) -> None:
        now = self._clock()
        record = {**self._record, "seen_at": now.isoformat()}
        with self._client.pipeline(transaction=False) as pipe:
            pipe.set(self._key, json.dumps(record), ex=self._ttl)
            pipe.zadd(WORKER_INDEX, {self._hostname: now.timestamp()})
            pipe.zremrangebyscore(WORKER_INDEX, "-inf", (now - INDEX_KEEP).timestamp())
            pipe.execute()
