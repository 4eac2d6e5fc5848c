"""Running one control-plane loop as a process: logging, and stopping on a signal."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Protocol

from common.process import settle_garbage_collector


class Loop(Protocol):
    """A component loop: runs until its ``stopping`` event is set."""

    stopping: threading.Event

    def run(self) -> None:
        """Run until stopped."""


def run_until_signalled(name: str, loop: Loop) -> None:
    """Run ``loop`` until SIGTERM or SIGINT, logging under the component's ``name``.

    The signal only sets the loop's event: the loop finishes what it is doing (a batch,
    a tick) and returns, so a stop never cuts a transaction in half.
    """
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s %(message)s"
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        loop.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    settle_garbage_collector()
    log = logging.getLogger(f"stellwerk.{name}")
    log.info("%s started", name)
    loop.run()
    log.info("%s stopped", name)

