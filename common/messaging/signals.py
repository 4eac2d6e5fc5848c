"""Activation messages: the signals the beat, the API and the engine's repair send a run."""

from __future__ import annotations

from common.messaging.messages import ACTIVATE_TASK, ACTIVATION_QUEUE, Activation, Signal
from common.messaging.publisher import Outgoing


def activation(
    run_id: object, signal: Signal, task: str | None = None, attempt: int | None = None
) -> Outgoing:
    """A ``stellwerk.activation`` message; the attempt-level signals name a task and attempt."""
    message = Activation(run_id=run_id, signal=signal, task=task, attempt=attempt)
    return Outgoing(ACTIVATION_QUEUE, ACTIVATE_TASK, message.model_dump(mode="json"),
                    str(message.message_id))
