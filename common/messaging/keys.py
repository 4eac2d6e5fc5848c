"""Redis keys the engine and the workers share, per attempt.

Both are keyed by the attempt's idempotency key (``<task run id>:<attempt>``), so a
retry (a new attempt) is never mistaken for the attempt before it.
"""

from __future__ import annotations

from datetime import timedelta

# Longer than any broker redelivery of one message, shorter than forever.
CLAIM_TTL = timedelta(days=1)
# Once the engine has committed an attempt's end, its claim only has to outlast a late
# second delivery of the same dispatch (an outbox row re-sent after a crash, a queue
# restored from Redis's append-only file): minutes. A day of claims at 10,000 attempts
# a second was ~130 GB of Redis (docs/operations.md, "Capacity").
FINISHED_CLAIM_TTL = timedelta(hours=1)


def attempt_key(task_run_id: object, attempt: int) -> str:
    """An attempt's idempotency key: ``<task run id>:<attempt>``."""
    return f"{task_run_id}:{attempt}"


def claim_key(idempotency_key: str) -> str:
    """Set (NX) by the worker that runs the attempt; a second delivery finds it taken."""
    return f"stellwerk:claim:{idempotency_key}"


def cancel_key(idempotency_key: str) -> str:
    """Set by the engine to ask whoever runs the attempt to stop."""
    return f"stellwerk:cancel:{idempotency_key}"
