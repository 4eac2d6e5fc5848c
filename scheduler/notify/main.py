"""``stellwerk notify``: the notify runner.

For now it fans every event out to the Redis pub/sub channel that the live event
stream reads; webhook and Celery-task subscriptions come with issue 5. Events are
acknowledged only after they have been published.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import redis
from kombu import Connection, Consumer, Exchange, Queue
from kombu.message import Message
from pydantic import ValidationError

from common.config import Settings
from common.messaging.messages import NOTIFY_QUEUE, NotifyBatch
from scheduler.service import run_until_signalled

log = logging.getLogger("stellwerk.notify")
EVENTS_CHANNEL = "stellwerk:events"


class NotifyRunner:
    """Consumes ``stellwerk.notify`` and publishes each event on the events channel."""

    def __init__(self, redis_url: str) -> None:
        self._url = redis_url
        self._redis = redis.Redis.from_url(redis_url)
        self.stopping = threading.Event()

    def run(self) -> None:
        """Consume until :attr:`stopping` is set."""
        queue = Queue(NOTIFY_QUEUE, Exchange(NOTIFY_QUEUE, type="direct"), routing_key=NOTIFY_QUEUE)
        with Connection(self._url) as conn, Consumer(
            conn.default_channel, queues=[queue], callbacks=[self._on_message], accept=["json"]
        ) as consumer:
            consumer.qos(prefetch_count=100)
            while not self.stopping.is_set():
                try:
                    conn.drain_events(timeout=1.0)
                except TimeoutError:
                    continue

    def _on_message(self, body: Any, message: Message) -> None:
        try:
            batch = NotifyBatch.model_validate(body[0][0])
        except (IndexError, KeyError, TypeError, ValidationError) as error:
            log.warning("dropping a malformed notify message: %s", error)
            message.ack()
            return
        with self._redis.pipeline(transaction=False) as pipe:
            for event in batch.events:
                pipe.publish(EVENTS_CHANNEL, json.dumps(event.model_dump(mode="json")))
            pipe.execute()
        message.ack()


def run_notify(settings: Settings) -> None:
    """Run the notify runner until SIGTERM or SIGINT."""
    _, redis_url = settings.require_urls()
    run_until_signalled("notify", NotifyRunner(redis_url))
