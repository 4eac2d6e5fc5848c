"""Publishing messages to Stellwerk's queues as Celery task messages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from celery import Celery


@dataclass(frozen=True)
class Outgoing:
    """One message to publish: the Celery task name, its queue, its single argument."""

    queue: str
    task_name: str
    payload: dict[str, Any]
    task_id: str | None = None


class Publisher:
    """Sends many messages over one broker connection."""

    def __init__(self, app: Celery) -> None:
        self._app = app

    def publish(self, messages: Iterable[Outgoing]) -> int:
        """Publish every message; return how many were sent."""
        sent = 0
        with self._app.producer_or_acquire() as producer:
            for item in messages:
                self._app.send_task(
                    item.task_name,
                    args=[item.payload],
                    queue=item.queue,
                    task_id=item.task_id,
                    producer=producer,
                )
                sent += 1
        return sent
