"""Celery's request, acknowledging its message once when two threads ask together.

A worker stopped past its lease (SIGSTOP, a long GC pause, a frozen VM) wakes with the
engine's revoke of its running attempt waiting on the control channel, while the
attempt, which saw its cancel flag, is finishing on a pool thread. Celery's request
answers the revoke on the consumer's thread (``_announce_revoked`` acknowledges) and the
finish on the pool thread (``on_success`` acknowledges); ``Request.acknowledge`` checks
and sets its flag without a lock, so both can pass the check. Each then schedules an
ack on the event loop, and kombu's second ``Message.ack`` raises ``MessageStateError``
there, which ends the worker. Here the check and the set are one step under a lock.
"""

from __future__ import annotations

import threading

from celery.worker.request import Request

# One lock for all requests: held while an answer is scheduled on the event loop (or,
# without one, sent), which is short, and contended only by such races.
_ANSWERING = threading.Lock()


class AckOnceRequest(Request):
    """A request whose message is acknowledged or rejected once, whoever asks."""

    def acknowledge(self) -> None:
        """Celery's acknowledge, its check and set made one step."""
        with _ANSWERING:
            super().acknowledge()

    def reject(self, requeue: bool = False) -> None:
        """Celery's reject, its check and set made one step."""
        with _ANSWERING:
            super().reject(requeue)
