"""When a failed delivery is tried again, and when it is given up (pure).

Exponential backoff with "equal jitter": the n-th retry waits a uniform draw between
half and all of ``base * 2^(n-1)`` (capped). The jitter spreads the retries of many
deliveries that failed together (a receiver that was down) so they do not return in
one burst; keeping half of the wait keeps a retry from following its failure at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

DeliveryState = Literal["pending", "delivered", "dead"]
_MAX_EXPONENT = 60  # 2^60 base delays is beyond any cap; keeps the float finite


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how far apart a delivery is tried."""

    max_attempts: int
    base: timedelta
    cap: timedelta


@dataclass(frozen=True)
class NextStep:
    """What becomes of a delivery after a try: its state and, if pending, when it is due."""

    state: DeliveryState
    due_at: datetime | None


def retry_delay(retry: int, policy: RetryPolicy, rand: float) -> timedelta:
    """The wait before the ``retry``-th retry (1-based); ``rand`` is uniform in [0, 1)."""
    exponent = min(max(retry - 1, 0), _MAX_EXPONENT)
    full = min(policy.cap.total_seconds(), policy.base.total_seconds() * 2.0**exponent)
    return timedelta(seconds=full * (0.5 + rand / 2))


def after_attempt(
    attempt: int, succeeded: bool, policy: RetryPolicy, now: datetime, rand: float,
    *, permanent: bool = False,
) -> NextStep:
    """The state after try number ``attempt``: delivered, retried later, or dead.

    A ``permanent`` failure (a target the egress policy refuses) is dead at once.
    """
    if succeeded:
        return NextStep("delivered", None)
    if permanent or attempt >= policy.max_attempts:
        return NextStep("dead", None)
    return NextStep("pending", now + retry_delay(attempt, policy, rand))
