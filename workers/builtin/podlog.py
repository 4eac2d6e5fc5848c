"""A pod's log, followed on a thread of its own into the task log.

The API streams the container's output (stdout and stderr interleaved, as the kubelet
keeps it) until the container ends; each line goes through
:func:`~workers.builtin.outputline.record_output_line`, so ``[saveJobStorage]`` works as
for ``shell``. The processor's own thread meanwhile watches the pod's phase and the
cancel flag.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import urllib3

from workers.builtin.outputline import record_output_line
from workers.builtin.podapi import LogLines, PodApiError
from workers.context import TaskContext


class LogFollower:
    """Starts following once the container has started; stops when told or at its end."""

    def __init__(self, ctx: TaskContext, open_log: Callable[[], LogLines]) -> None:
        self._ctx = ctx
        self._open_log = open_log
        self._lock = threading.Lock()
        self._lines: LogLines | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin reading (once; later calls do nothing)."""
        if self._thread is None:
            name = f"pod log {self._ctx.idempotency_key}"
            self._thread = threading.Thread(target=self._read, name=name, daemon=True)
            self._thread.start()

    def finish(self, drain: timedelta) -> None:
        """Wait up to ``drain`` for the log's end (the container has ended), then stop."""
        if self._thread is not None:
            self._thread.join(drain.total_seconds())
            if self._thread.is_alive():
                self._ctx.log("[stellwerk] the pod's log did not end with it: stopped reading")
        self.close()

    def close(self) -> None:
        """Stop reading now; the reader thread ends with the connection."""
        with self._lock:
            self._closed = True
            lines, self._lines = self._lines, None
        if lines is not None:
            lines.close()

    def _read(self) -> None:
        try:
            lines = self._open_log()
        except PodApiError as error:
            self._ctx.log(f"[stellwerk] cannot read the pod's log: {error}")
            return
        with self._lock:
            if self._closed:
                lines.close()
                return
            self._lines = lines
        try:
            for line in lines:
                record_output_line(self._ctx, line, "stdout")
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if not self._closed:
                self._ctx.log(f"[stellwerk] the pod's log broke off: {exc}")
