"""Workers' liveness records on real Redis: found through the index, never by a scan."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
import redis

from common.messaging.liveness import WORKER_INDEX, LivenessBeacon, live_workers, worker_key
from tests.conftest import claim_redis_db


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """A Redis database of the test's own."""
    with contextlib.closing(redis.Redis.from_url(claim_redis_db(redis_url))) as own:
        yield own
        own.flushdb()


def beacon(client: redis.Redis, hostname: str, at: datetime) -> LivenessBeacon:
    return LivenessBeacon(client, hostname, ["noop"], 4, refresh=timedelta(hours=1),
                          clock=lambda: at)


def test_live_workers_are_found_by_the_index_and_a_stopped_one_leaves_it(
    client: redis.Redis,
) -> None:
    now = datetime.now(UTC)
    client.set(worker_key("not-indexed@host"), '{"hostname": "not-indexed@host"}')
    with beacon(client, "b@host", now), beacon(client, "a@host", now):
        assert [w["hostname"] for w in live_workers(client)] == ["a@host", "b@host"]
    assert live_workers(client) == []
    assert client.zcard(WORKER_INDEX) == 0


def test_an_expired_record_is_skipped_and_a_long_silent_member_dropped(
    client: redis.Redis,
) -> None:
    now = datetime.now(UTC)
    client.zadd(WORKER_INDEX, {"dead@host": (now - timedelta(minutes=2)).timestamp(),
                               "expired@host": now.timestamp()})
    with beacon(client, "live@host", now):
        assert [w["hostname"] for w in live_workers(client)] == ["live@host"]
        members = {m.decode() for m in cast(list[bytes], client.zrange(WORKER_INDEX, 0, -1))}
        assert members == {"live@host", "expired@host"}
