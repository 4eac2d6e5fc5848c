"""Riding out a server outage: log it once, retry with capped backoff, say it is over.

Every long-running loop (engine, beat, notify, producers, worker, connector) keeps one
:class:`Outage` per server it depends on. When a call fails with a connection error the
loop calls :meth:`Outage.failed` and waits the returned delay before trying again; the
first failure logs a warning, the following ones only count, and the first success
after them logs how long it lasted. The delay doubles from ``first_wait`` up to
``max_wait`` (1 s by default), so a loop resumes within about a second of the server's
return, and a loop waiting for two minutes costs a few hundred cheap attempts, not a
log line each.

``healthy`` is what the component's health check reports (``stellwerk healthcheck``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta


class Outage:
    """The state of one server as one loop sees it: up, or down since when."""

    def __init__(
        self, server: str, log: logging.Logger, *,
        first_wait: timedelta = timedelta(milliseconds=100),
        max_wait: timedelta = timedelta(seconds=1),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``server`` names it in the log (``Redis``, ``PostgreSQL``)."""
        self._server = server
        self._log = log
        self._first_s = first_wait.total_seconds()
        self._max_s = max_wait.total_seconds()
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0

    @property
    def server(self) -> str:
        """The server's name, as the log and the health status give it."""
        return self._server

    @property
    def healthy(self) -> bool:
        """Whether the last call to the server succeeded (or none failed yet)."""
        return self._since is None

    @property
    def down_for(self) -> timedelta:
        """How long the server has been unreachable; zero when it is up."""
        since = self._since
        return timedelta(0) if since is None else timedelta(seconds=self._monotonic() - since)

    def failed(self, error: BaseException) -> float:
        """Count a failed call; return how many seconds to wait before the next one.

        Only the first failure of an outage is logged (with the error); a loop that
        retries every second for two minutes writes one line, not a hundred and twenty.
        """
        with self._lock:
            if self._since is None:
                self._since = self._monotonic()
                self._log.warning("%s is unreachable (%s); retrying until it is back",
                                  self._server, _one_line(error))
            self._failures += 1
            return float(min(self._max_s, self._first_s * 2.0 ** (self._failures - 1)))

    def succeeded(self) -> None:
        """A call went through: an outage, if there was one, is over (logged once)."""
        if self._since is None:
            return
        with self._lock:
            if self._since is None:
                return
            lasted = self._monotonic() - self._since
            self._log.warning("%s is back after %.1f s (%d failed tries)",
                              self._server, lasted, self._failures)
            self._since, self._failures = None, 0


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
