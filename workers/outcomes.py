"""What a processor returns: the outcome of one attempt, as the processor sees it.

The runtime maps these onto ``TaskResult`` outcomes. ``TIMEOUT`` is not among them on
purpose: only the runtime knows that the attempt's deadline passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Completed:
    """The task did its work; ``output`` becomes the task run's output."""

    output: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed:
    """The task tried and failed; the engine may retry it."""

    message: str
    output: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejected:
    """The task was refused without being executed (bad input, no permission)."""

    message: str


@dataclass(frozen=True)
class Accepted:
    """Someone else completes the task later by post-back.

    The worker reports the attempt detached: from then on its task's timeout, not the
    worker's lease, bounds how long it may stay ACTIVE.
    """


Outcome = Completed | Failed | Rejected | Accepted
