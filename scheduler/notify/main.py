"""``stellwerk notify``: the notify runner (docs/architecture.md, "The processes").

Two loops share one stop signal: the intake (``intake``) turns the events recorded in
PostgreSQL into deliveries and live-stream entries, the delivery loop
(``delivery_loop``) sends the deliveries: signed webhook POSTs with retries and a
dead-letter state, or Celery task messages. Several runners may run side by side.
The ``stellwerk notify`` process runs this runner beside the consumer of producers'
requests; it is composed in its entry point, ``scheduler.cli.components.run_notify``.
"""

from __future__ import annotations

import threading

import httpx
import redis

from common.config import Settings
from common.messaging.messages import utcnow
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.secure_params import SecretBox
from scheduler.notify.backoff import RetryPolicy
from scheduler.notify.deliveries import DeliveryStore
from scheduler.notify.delivery_loop import DeliveryLoop
from scheduler.notify.intake import Intake
from scheduler.notify.senders import CeleryTaskSender, Sender, WebhookSender
from scheduler.notify.wakeup import Wakeup


class NotifyRunner:
    """The intake on the calling thread, the delivery loop on a thread of its own."""

    def __init__(self, intake: Intake, deliveries: DeliveryLoop, stopping: threading.Event) -> None:
        """Both loops must watch ``stopping``."""
        self.intake = intake
        self.deliveries = deliveries
        self.stopping = stopping
        self.outages = [*intake.outages, *deliveries.outages]

    def run(self) -> None:
        """Run both loops until :attr:`stopping` is set; in-flight deliveries finish."""
        thread = threading.Thread(target=self.deliveries.run, name="deliveries")
        thread.start()
        try:
            self.intake.run()
        finally:
            self.stopping.set()
            self.deliveries.wake.set()
            thread.join()


def build_runner(settings: Settings, http: httpx.Client) -> NotifyRunner:
    """A runner on the configured servers; ``http`` sends the webhooks.

    Build ``http`` with :func:`~scheduler.notify.egress_transport.webhook_client`, which
    holds every webhook to the egress policy.
    """
    database_url, redis_url = settings.require_urls()
    sessions = make_sessions(make_engine(database_url, pool_size=settings.notify_concurrency))
    # Timeouts: a Redis that stops answering is an outage of the live stream, not a hang.
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=2.0, socket_timeout=5.0)
    stopping = threading.Event()
    senders: dict[str, Sender] = {
        "webhook": WebhookSender(http, SecretBox(settings.secret_key), utcnow),
        "celery_task": CeleryTaskSender(Publisher(client)),
    }
    policy = RetryPolicy(settings.webhook_max_attempts, settings.webhook_retry_base,
                         settings.webhook_retry_max)
    deliveries = DeliveryLoop(
        DeliveryStore(sessions), senders, policy, concurrency=settings.notify_concurrency,
        send_timeout=settings.webhook_timeout, clock=utcnow, stopping=stopping,
    )
    intake = Intake(sessions, Wakeup(database_url), client, clock=utcnow, stopping=stopping,
                    on_deliveries=deliveries.wake.set)
    return NotifyRunner(intake, deliveries, stopping)
