"""The Celery application factory: JSON only, late acks, requeue on worker loss.

Built per process by each runtime's entry point; nothing is created at import time.
The broker's visibility timeout is long on purpose: a lost worker's task is requeued by
the engine when its lease expires (seconds), not by the broker (hours).
"""

from __future__ import annotations

from celery import Celery


def make_celery(redis_url: str, name: str = "stellwerk") -> Celery:
    """A Celery app on ``redis_url``: JSON only (docs/decisions.md, "Messaging"), late acks."""
    app = Celery(name, broker=redis_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_create_missing_queues=True,
        broker_connection_retry_on_startup=True,
        # A Redis outage of any length is waited out, never a reason to exit (issue 13).
        broker_connection_retry=True,
        broker_connection_max_retries=None,
        broker_transport_options={"visibility_timeout": 12 * 3600},
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
        enable_utc=True,
    )
    return app
