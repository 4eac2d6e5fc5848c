"""Running one control-plane loop as a process: logging, and stopping on a signal."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Protocol

from common.health import StatusWriter
from common.outage import Outage
from common.process import settle_garbage_collector


class Loop(Protocol):
    """A component loop: runs until its ``stopping`` event is set."""

    stopping: threading.Event

    def run(self) -> None:
        """Run until stopped."""


def configure_logging(name: str) -> None:
    """Log INFO and up to stderr, each line naming the component.

    Called by :func:`run_until_signalled`, and before it by a component whose building
    logs (or may fail): a line written before logging is configured is lost.
    """
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s %(message)s"
    )


def outages_of(loop: object) -> list[Outage]:
    """The outage trackers a loop exposes as ``outages`` (none if it has no such attribute).

    Its health check reports unhealthy while any of them says its server is down.
    """
    outages = getattr(loop, "outages", ())
    return [outage for outage in outages if isinstance(outage, Outage)]


def run_until_signalled(name: str, loop: Loop, *, health_dir: Path | None = None) -> None:
    """Run ``loop`` until SIGTERM or SIGINT, logging under the component's ``name``.

    The signal only sets the loop's event: the loop finishes what it is doing (a batch,
    a tick) and returns, so a stop never cuts a transaction in half. With
    ``health_dir``, the loop's :func:`outages_of` are written there for
    ``stellwerk healthcheck`` (:mod:`common.health`).
    """
    configure_logging(name)

    def stop(signum: int, frame: FrameType | None) -> None:
        loop.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    settle_garbage_collector()
    log = logging.getLogger(f"stellwerk.{name}")
    with contextlib.ExitStack() as stack:
        if health_dir is not None:
            stack.enter_context(StatusWriter(health_dir, name, lambda: outages_of(loop)))
        log.info("%s started", name)
        loop.run()
        log.info("%s stopped", name)



class Together:
    """Several loops of one process, each in its own thread, stopped together.

    When one of them returns or fails, the others are stopped too and the failure is
    raised: the process then ends, and its supervisor (``stellwerk up``, compose)
    restarts it whole, rather than letting it run on with a part missing.
    """

    def __init__(self, loops: Sequence[Loop]) -> None:
        self._loops = list(loops)
        self._failure: Exception | None = None
        self.stopping = threading.Event()

    @property
    def outages(self) -> list[Outage]:
        """The outage trackers of every loop, for the process's health status."""
        return [outage for loop in self._loops for outage in outages_of(loop)]

    def run(self) -> None:
        """Run every loop until :attr:`stopping` is set or one of them ends."""
        threads = [
            threading.Thread(target=self._run_one, args=(loop,), name=type(loop).__name__)
            for loop in self._loops
        ]
        for thread in threads:
            thread.start()
        while not self.stopping.wait(1.0):
            pass  # a timed wait: the main thread stays responsive to signals
        for loop in self._loops:
            loop.stopping.set()
        for thread in threads:
            thread.join()
        if self._failure is not None:
            raise RuntimeError(f"a loop failed: {self._failure!r}") from self._failure

    def _run_one(self, loop: Loop) -> None:
        try:
            loop.run()
        except Exception as error:
            logging.getLogger("stellwerk").exception("%s failed", type(loop).__name__)
            self._failure = error
        finally:
            self.stopping.set()
