"""The worker's consumer, made to ride out a Redis outage (issue 13).

Celery's own consumer reconnects, but two things in it fail the requirement:

- When the connection drops while tasks hold unacknowledged messages, Celery 5.7 first
  collects the broken connection (its transport loses its client), then closes
  it; closing the channel gives the unacknowledged messages back
  (``restore_unacked``), which needs a client it no longer has, and the
  ``AttributeError`` that follows is no connection error: the worker exits with
  "Unrecoverable error". :meth:`SteadyConsumer.on_connection_error_after_connected`
  gives them back first, while the channel still works; if Redis is gone that fails
  too, and they stay where Redis keeps them (its unacked set) — the engine's lease
  requeues a lost attempt in any case, and a running one finishes and reports.
- A task that was running meanwhile acknowledges its message, after the reconnect, on
  the old channel, whose transport is gone: the same ``AttributeError``, raised in the
  event loop, ends the worker. The old channel's acknowledgements are made to go
  through a client of their own (:class:`_LateAcks`).
- It waits 2, 4, 6 … up to 30 s between tries and logs each: after a two-minute
  outage the worker would resume up to 30 s late. Here the waits are capped at 1 s and
  the outage is logged once, and once when it is over (:class:`common.outage.Outage`).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery.worker.consumer import Consumer
from celery.worker.state import maybe_shutdown

from common.outage import Outage

log = logging.getLogger(__name__)

FIRST_WAIT_S = 0.1
WAIT_STEP_S = 0.3
MAX_WAIT_S = 1.0


def steady_consumer(outage: Outage) -> type[Consumer]:
    """A consumer class whose broker outages are counted by ``outage``.

    A class per worker, because Celery builds the consumer itself from a class.
    """

    class SteadyConsumer(Consumer):
        """Celery's consumer, reconnecting within a second and surviving a lost channel."""

        def ensure_connected(self, conn: Any) -> Any:
            """Connect, retrying every second at most, for as long as it takes."""

            def failed(error: Exception, interval: float) -> None:
                outage.failed(error)

            conn = conn.ensure_connection(
                failed, None, interval_start=FIRST_WAIT_S, interval_step=WAIT_STEP_S,
                interval_max=MAX_WAIT_S, callback=maybe_shutdown,
            )
            outage.succeeded()
            self.first_connection_attempt = False
            self.broker_connection_retry_attempt = 0
            return conn

        def on_connection_error_after_connected(self, exc: Exception) -> None:
            """Give the unacknowledged messages back before Celery breaks the channel."""
            outage.failed(exc)
            _restore_unacked(self.connection, str(self.app.conf.broker_url))
            super().on_connection_error_after_connected(exc)

    return SteadyConsumer


def _restore_unacked(connection: Any, broker_url: str) -> None:
    """Put the channel's unacknowledged messages back in their queues, or leave them be.

    ``restore_unacked_once`` marks the channel's state restored even when it fails; its
    list is cleared here so that the close that follows does not try (and fail) again.
    """
    channel = getattr(connection, "_default_channel", None) if connection else None
    qos = getattr(channel, "_qos", None)
    if qos is None:
        return
    try:
        qos.restore_unacked_once()
    except Exception as error:  # Redis is gone: they stay in its unacked set
        log.info("unacknowledged messages left in Redis (%s)", type(error).__name__)
    qos._delivered.clear()
    qos.ack = _LateAcks(qos.unacked_key, qos.unacked_index_key, broker_url)


class _LateAcks:
    """Acknowledges a message of a channel that is gone: it leaves Redis's unacked set.

    The same two commands as kombu's own ack, on a client of its own. A message not
    acknowledged because Redis is down again stays there; were it given back after the
    broker's visibility timeout, the attempt's claim would skip it.
    """

    def __init__(self, unacked_key: str, index_key: str, broker_url: str) -> None:
        self._unacked_key = unacked_key
        self._index_key = index_key
        self._url = broker_url

    def __call__(self, delivery_tag: str) -> None:
        """Acknowledge one message by its delivery tag."""
        try:
            with redis.Redis.from_url(self._url) as client, client.pipeline() as pipe:
                pipe.zrem(self._index_key, delivery_tag)
                pipe.hdel(self._unacked_key, delivery_tag)
                pipe.execute()
        except redis.RedisError as error:
            log.info("a message of a lost channel stays unacknowledged (%s)", error)
