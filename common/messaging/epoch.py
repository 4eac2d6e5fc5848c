"""Telling that Redis lost its data: the epoch key.

Redis may restart empty (a crash without persistence, a failover to a replica that had
not caught up). Nothing is lost for good when that happens, because PostgreSQL and the
workers know everything Redis held, but several parts must act on it: workers assert
their claims and send their outcomes again, the engine dispatches again what nobody
holds (``scheduler.engine.resync``), and the beat must not take the missing liveness
keys of live workers for dead workers until they had the time to write them again.

``stellwerk:epoch`` holds a random name and the time it was created. Whoever finds it
missing creates it (one Lua call, so concurrent callers agree on one value); a value
different from the one a component saw before means Redis lost its data in between.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import redis

EPOCH_KEY = "stellwerk:epoch"

_ENSURE = """
local value = redis.call('GET', KEYS[1])
if value then return value end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"""


@dataclass(frozen=True)
class Epoch:
    """One lifetime of Redis's data: its name and when it began (unix seconds)."""

    name: str
    began_s: float

    def age(self, now_s: float | None = None) -> timedelta:
        """How long ago this epoch began (never negative: clocks of hosts differ)."""
        now_s = time.time() if now_s is None else now_s
        return timedelta(seconds=max(0.0, now_s - self.began_s))


def current_epoch(client: redis.Redis) -> Epoch:
    """The epoch of the data Redis holds now, creating it if Redis has none."""
    fresh = f"{uuid.uuid4().hex} {time.time():.3f}"
    raw = client.eval(_ENSURE, 1, EPOCH_KEY, fresh)
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    name, _, began = text.partition(" ")
    try:
        began_s = float(began)
    except ValueError:  # written by hand, or by something else: it began now
        began_s = time.time()
    return Epoch(name, began_s)
