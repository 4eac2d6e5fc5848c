"""The captured log of one attempt: lines waiting to be reported, thread-safe.

Processors (and a shell's reader threads) append; the heartbeat thread and the final
report drain it in bounded chunks, so one chatty task can neither blow up a broker
message nor the worker's memory. Secure parameter values are masked on the way in, so
a secret never reaches a message, the database or the UI (docs/decisions.md, "Secure
params", "Masking").
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Literal

from common.messaging.messages import LogLine, utcnow

LogStream = Literal["stdout", "stderr", "log"]

MASK = "***"
# Shorter secrets would mask ordinary words and numbers all over the log.
MIN_SECRET_CHARS = 4
MAX_LINE_CHARS = 8 * 1024
MAX_CHUNK_LINES = 1000
MAX_CHUNK_BYTES = 256 * 1024
MAX_PENDING_BYTES = 16 * 1024 * 1024
# JSON overhead of one line on the wire (timestamp, stream, keys), roughly.
_LINE_OVERHEAD_BYTES = 64


class TaskLog:
    """Lines captured from one attempt and not yet reported."""

    def __init__(
        self,
        secrets: Iterable[str] = (),
        clock: Callable[[], datetime] = utcnow,
        max_pending_bytes: int = MAX_PENDING_BYTES,
    ) -> None:
        # Longest first, so that a secret containing another is masked whole.
        masked = {secret for secret in secrets if len(secret) >= MIN_SECRET_CHARS}
        self._secrets = sorted(masked, key=len, reverse=True)
        self._clock = clock
        self._max_pending_bytes = max_pending_bytes
        self._lock = threading.Lock()
        self._pending: deque[tuple[LogLine, int]] = deque()
        self._pending_bytes = 0
        self._dropped = 0

    def append(self, line: str, stream: LogStream = "log") -> None:
        """Capture one line, masked and truncated; drop it if too much is pending."""
        entry = LogLine(at=self._clock(), stream=stream, line=self._clean(line))
        size = len(entry.line.encode()) + _LINE_OVERHEAD_BYTES
        with self._lock:
            if self._pending_bytes + size > self._max_pending_bytes:
                self._dropped += 1
                return
            self._pending.append((entry, size))
            self._pending_bytes += size

    def drain(
        self, max_lines: int = MAX_CHUNK_LINES, max_bytes: int = MAX_CHUNK_BYTES
    ) -> list[LogLine]:
        """Take the oldest pending lines, at most ``max_lines`` and about ``max_bytes``."""
        with self._lock:
            chunk = self._dropped_notice()
            size = 0
            while self._pending and len(chunk) < max_lines:
                entry, entry_size = self._pending[0]
                if chunk and size + entry_size > max_bytes:
                    break
                self._pending.popleft()
                self._pending_bytes -= entry_size
                chunk.append(entry)
                size += entry_size
            return chunk

    def has_pending(self) -> bool:
        """Whether anything is waiting to be reported."""
        with self._lock:
            return bool(self._pending) or self._dropped > 0

    def _dropped_notice(self) -> list[LogLine]:
        if not self._dropped:
            return []
        line = f"[stellwerk] {self._dropped} log lines dropped: written faster than reported"
        self._dropped = 0
        return [LogLine(at=self._clock(), stream="log", line=line)]

    def mask(self, text: str) -> str:
        """``text`` with every secure value replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def mask_value(self, value: Any) -> Any:
        """A JSON value (an outcome's output) with every string in it masked."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {key: self.mask_value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.mask_value(item) for item in value]
        return value

    def _clean(self, line: str) -> str:
        line = self.mask(line.rstrip("\r\n"))
        if len(line) > MAX_LINE_CHARS:
            cut = len(line) - MAX_LINE_CHARS
            line = f"{line[:MAX_LINE_CHARS]} [stellwerk: {cut} more characters truncated]"
        return line


def secret_strings(*values: Any) -> set[str]:
    """Every form in which a value inside ``values`` may show up in a log line.

    Strings, numbers as text (``4711``, ``3.25``) and, where JSON writes a string
    differently (quotes, backslashes, non-ASCII, as in ``$JOB_SECURE_PARAMS``), its
    JSON-escaped form. Nested dicts and lists included; booleans and null are no secret.
    """
    found: set[str] = set()
    for text in _walk_strings(values):
        found.add(text)
        found.add(json.dumps(text)[1:-1])
    return found


def _walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)
        yield json.dumps(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk_strings(item)
