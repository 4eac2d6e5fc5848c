"""Building the notify messages that state changes put in the outbox."""

from __future__ import annotations

from collections.abc import Sequence

from common.messaging.messages import NOTIFY_QUEUE, NOTIFY_TASK, Event, NotifyBatch
from common.messaging.publisher import Outgoing


def notify_message(events: Sequence[Event]) -> Outgoing:
    """One ``stellwerk.notify`` message carrying ``events`` in order."""
    batch = NotifyBatch(events=list(events))
    return Outgoing(NOTIFY_QUEUE, NOTIFY_TASK, batch.model_dump(mode="json"), str(batch.message_id))
