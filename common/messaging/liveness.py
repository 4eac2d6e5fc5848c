"""Which workers are alive now, as their own Redis records say (``GET /processors``).

Each running worker keeps one short-lived key, ``stellwerk:workers:<hostname>``, holding
a JSON record (``hostname``, ``types``, ``concurrency``, ``pid``, ``started_at``,
``seen_at``). It refreshes the key well inside its TTL, so a worker that dies vanishes
from the list within the TTL without anyone cleaning up after it. The writer lives in
``workers.liveness``; the reader is here so that the API can use it without importing
the worker runtime.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import redis

WORKER_KEY_PREFIX = "stellwerk:workers:"
LIVENESS_TTL = timedelta(seconds=10)
LIVENESS_REFRESH = timedelta(seconds=3)


def worker_key(hostname: str) -> str:
    """The Redis key of one worker's liveness record."""
    return f"{WORKER_KEY_PREFIX}{hostname}"


def live_workers(client: redis.Redis) -> list[dict[str, Any]]:
    """The records of the workers alive now, sorted by hostname.

    A key that expires between the scan and the read, or holds something that is not
    a JSON object, is left out rather than reported as a worker.
    """
    keys = sorted(client.scan_iter(match=f"{WORKER_KEY_PREFIX}*", count=500))
    if not keys:
        return []
    records: list[dict[str, Any]] = []
    for raw in client.mget(keys):
        record = _parse(raw)
        if record is not None:
            records.append(record)
    return sorted(records, key=lambda record: str(record.get("hostname", "")))


def _parse(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, bytes | str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
