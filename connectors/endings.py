"""How an attempt of the connector ends, as its processor sees it.

The runtime turns these into result messages: :class:`Finished` into ``finished``,
:class:`HandedOver` into a ``started`` (or ``heartbeat``) marked ``detached``, after
which a web-service worker reports the outcome itself through its callbacks.
``TIMEOUT`` and the cancel are decided by the runtime, which alone knows the deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.messaging.messages import Outcome


@dataclass(frozen=True)
class Finished:
    """The attempt's outcome, with the task's output and lines for its log."""

    outcome: Outcome
    message: str = ""
    output: dict[str, Any] | None = None
    log: tuple[str, ...] = ()


@dataclass(frozen=True)
class HandedOver:
    """A web-service worker accepted the task (201); its callbacks finish it."""

    log: tuple[str, ...] = ()


Ending = Finished | HandedOver
