"""The notify runner drains stellwerk.notify and fans each event out on pub/sub."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime

import redis

from common.messaging.messages import Event
from common.messaging.notify import notify_message
from common.messaging.publisher import Publisher
from scheduler.notify.main import EVENTS_CHANNEL, NotifyRunner


def event(name: str) -> Event:
    return Event(event=name, at=datetime.now(UTC), job_id=uuid.uuid4(), job_name="j")


def test_events_reach_the_live_channel_in_order(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    pubsub = client.pubsub()
    pubsub.subscribe(EVENTS_CHANNEL)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
    runner = NotifyRunner(redis_url)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        Publisher(client).publish([notify_message([event("run.started"), event("run.done")])])
        received = []
        while len(received) < 2:
            message = pubsub.get_message(timeout=10)
            assert message is not None, f"only {received} arrived"
            if message["type"] == "message":
                received.append(json.loads(message["data"])["event"])
        assert received == ["run.started", "run.done"]
    finally:
        runner.stopping.set()
        thread.join(10)
    assert client.llen("stellwerk.notify") == 0
