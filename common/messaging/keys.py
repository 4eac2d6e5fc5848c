"""Redis keys the engine and the workers share, per attempt.

Both are keyed by the attempt's idempotency key (``<task run id>:<attempt>``), so a
retry (a new attempt) is never mistaken for the attempt before it.
"""

from __future__ import annotations

from datetime import timedelta

# Longer than any broker redelivery of one message, shorter than forever.
CLAIM_TTL = timedelta(days=1)


def claim_key(idempotency_key: str) -> str:
    """Set (NX) by the worker that runs the attempt; a second delivery finds it taken."""
    return f"stellwerk:claim:{idempotency_key}"


def cancel_key(idempotency_key: str) -> str:
    """Set by the engine to ask whoever runs the attempt to stop."""
    return f"stellwerk:cancel:{idempotency_key}"
