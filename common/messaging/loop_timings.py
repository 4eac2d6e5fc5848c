"""Loop timings of the engine and the beat, kept where ``GET /metrics`` can read them.

The engine and the beat serve no HTTP. Each process keeps a histogram of its loop
iterations (an engine batch, a beat step) in memory and writes it to one Redis hash
every few seconds, ``stellwerk:timings:<loop>:<instance>`` with a TTL; the API renders
every live instance's hash as a Prometheus histogram labelled by loop and instance. The
totals count from the process's start, so a restarted process starts again at zero,
which Prometheus reads as a counter reset, exactly as for a process it scrapes itself.
A process that stops drops out within the TTL.
"""

from __future__ import annotations

import bisect
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta

import redis

log = logging.getLogger(__name__)
KEY_PREFIX = "stellwerk:timings:"
BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
FLUSH_EVERY = timedelta(seconds=5)
KEY_TTL = timedelta(seconds=30)


def default_instance() -> str:
    """``<hostname>:<pid>``: unique among the processes that run at one time."""
    return f"{socket.gethostname()}:{os.getpid()}"


class LoopTimings:
    """A histogram of one loop's iteration times, written to Redis now and then."""

    def __init__(
        self, client: redis.Redis, loop: str, *, instance: str | None = None,
        flush_every: timedelta = FLUSH_EVERY,
    ) -> None:
        self._client = client
        self._key = f"{KEY_PREFIX}{loop}:{instance or default_instance()}"
        self._flush_every_s = flush_every.total_seconds()
        self._counts = [0] * (len(BUCKETS_S) + 1)  # the last one is +Inf
        self._sum_s = 0.0
        self._next_flush = 0.0

    def observe(self, seconds: float) -> None:
        """Count one iteration that took ``seconds``; write out if it is time."""
        self._counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self._sum_s += seconds
        self.flush_if_due()

    def flush_if_due(self) -> None:
        """Write the histogram if the last write is ``flush_every`` old (also when idle)."""
        now = time.monotonic()
        if now >= self._next_flush:
            self._next_flush = now + self._flush_every_s
            self.flush()

    def flush(self) -> None:
        """Write the histogram now; a Redis error is logged, never raised into the loop."""
        fields: dict[str, float] = {"sum": self._sum_s}
        fields.update({f"b{i}": n for i, n in enumerate(self._counts)})
        try:
            with self._client.pipeline(transaction=False) as pipe:
                pipe.hset(self._key, mapping=fields)  # type: ignore[arg-type]
                pipe.expire(self._key, KEY_TTL)
                pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError) as error:
            # Redis is down: the loop's own Outage says so once; a line every flush
            # would repeat it every few seconds of the outage.
            log.debug("could not write loop timings: %s", error)
        except redis.RedisError as error:
            log.warning("could not write loop timings: %s", error)


@dataclass(frozen=True)
class TimingSnapshot:
    """One instance's histogram as read back: cumulative counts per upper bound."""

    loop: str
    instance: str
    buckets: list[tuple[float, int]]  # (upper bound in seconds, cumulative count); last +Inf
    sum_s: float

    @property
    def count(self) -> int:
        """All iterations observed."""
        return self.buckets[-1][1]


def read_timings(client: redis.Redis) -> list[TimingSnapshot]:
    """Every live instance's histogram, sorted by loop and instance."""
    keys = sorted(client.scan_iter(match=f"{KEY_PREFIX}*", count=500))
    if not keys:
        return []
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hgetall(key)
        hashes = pipe.execute()
    snapshots = [_snapshot(key, fields) for key, fields in zip(keys, hashes, strict=True)]
    return [s for s in snapshots if s is not None]


def _snapshot(key: bytes | str, fields: dict[bytes, bytes]) -> TimingSnapshot | None:
    name = key.decode() if isinstance(key, bytes) else key
    loop, _, instance = name.removeprefix(KEY_PREFIX).partition(":")
    try:
        values = {k.decode(): float(v) for k, v in fields.items()}
        counts = [int(values[f"b{i}"]) for i in range(len(BUCKETS_S) + 1)]
        sum_s = values["sum"]
    except (KeyError, ValueError):
        return None  # expired between the scan and the read, or not ours
    running, buckets = 0, []
    for bound, n in zip((*BUCKETS_S, float("inf")), counts, strict=True):
        running += n
        buckets.append((bound, running))
    return TimingSnapshot(loop, instance, buckets, sum_s)
