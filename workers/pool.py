"""Celery's thread pool, answering ``revoke(terminate=True)`` instead of failing it.

The engine stops a running attempt two ways at once: it sets the attempt's cancel key
and revokes its message with ``terminate=True`` (docs/decisions.md, "Run control"),
which a prefork pool honours
by signalling the child). A thread cannot be killed, so Celery's thread pool raises
``NotImplementedError`` and the worker logs a traceback for every cancel. Here the
terminate is a no-op: the heartbeat sees the cancel key and raises the processor's
cancel flag, which is how a thread is stopped.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.concurrency.thread import TaskPool

logger = logging.getLogger(__name__)


class CooperativeThreadPool(TaskPool):
    """Threads that stop through their attempt's cancel flag, not a signal."""

    def terminate_job(self, pid: Any, signal: Any = None) -> None:
        """Leave the thread running: its cancel flag stops it."""
        logger.info("terminate requested: the attempt stops through its cancel flag")
