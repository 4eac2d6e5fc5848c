"""Status files: how a running component tells its health check that a server is down.

Each long-running process (engine, beat, notify, worker, connector) keeps one
:class:`common.outage.Outage` per server each of its loops depends on. A
:class:`StatusWriter` thread writes what they say, every :data:`REFRESH`, to
``<data_dir>/health/<component>-<pid>.json``::

    {"component": "engine", "pid": 4242, "host": "vm", "written_at": 1767225600.0,
     "down": {"Redis": 12.5}}

``stellwerk healthcheck <component>`` reads the files of that component whose process
still runs on this host (:func:`read_statuses`) and fails while any names a server that
is down, or has not been rewritten for :data:`STALE_AFTER` (a hung process). A file
is the simplest channel that works with the server that is down being either one:
the health check must not need Redis or PostgreSQL to learn that they are gone.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import TracebackType

import psutil

from common.outage import Outage

log = logging.getLogger(__name__)

HEALTH_DIR = "health"
REFRESH = timedelta(seconds=2)
STALE_AFTER = timedelta(seconds=15)


def health_dir(data_dir: Path) -> Path:
    """Where the status files of the processes using ``data_dir`` live."""
    return data_dir / HEALTH_DIR


@dataclass(frozen=True)
class Status:
    """What one process said about its servers when it last wrote its file."""

    component: str
    pid: int
    written_at: float  # time.time()
    started_at: float = 0.0  # the process's create time: a reused pid is another process
    down: dict[str, float] = field(default_factory=dict)  # server → seconds down

    @property
    def healthy(self) -> bool:
        """Every server this process depends on answered its last call."""
        return not self.down


def status_of(component: str, outages: Iterable[Outage], now: float | None = None) -> Status:
    """The status of this process, from its loops' outage trackers.

    Two loops may watch one server; the longer outage is the one that counts.
    """
    down: dict[str, float] = {}
    for outage in outages:
        if not outage.healthy:
            seconds = outage.down_for.total_seconds()
            down[outage.server] = max(seconds, down.get(outage.server, 0.0))
    return Status(component, os.getpid(), time.time() if now is None else now, _started_at(),
                  down)


def verdict(component: str, statuses: Sequence[Status], now: float,
            stale_after: timedelta = STALE_AFTER) -> str | None:
    """None when the component is healthy, else a one-line reason.

    No status at all is not a verdict here: whether the component runs at all is the
    other half of the health check (its sign of life in Redis).
    """
    problems = []
    for status in statuses:
        age = now - status.written_at
        if age > stale_after.total_seconds():
            problems.append(f"pid {status.pid} has not written its status for {age:.0f} s")
        problems += [f"pid {status.pid} cannot reach {server} (for {seconds:.0f} s)"
                     for server, seconds in sorted(status.down.items())]
    if not problems:
        return None
    return f"the {component} is unhealthy: " + "; ".join(problems)


def read_statuses(directory: Path, component: str) -> list[Status]:
    """The statuses of ``component``'s processes that still run (files of dead pids: ignored)."""
    statuses = []
    for path in sorted(directory.glob(f"{component}-*.json")):
        status = _read(path)
        if status is not None and status.component == component and _alive(status):
            statuses.append(status)
    return statuses


class StatusWriter:
    """Rewrites this process's status file every ``refresh`` until stopped, then removes it."""

    def __init__(self, directory: Path, component: str,
                 outages: Callable[[], Iterable[Outage]], refresh: timedelta = REFRESH) -> None:
        """``outages`` is asked at every write: loops may be built after the writer."""
        self._path = directory / f"{component}-{os.getpid()}.json"
        self._component = component
        self._outages = outages
        self._refresh_s = refresh.total_seconds()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-status", daemon=True)

    def __enter__(self) -> StatusWriter:
        """Write the first status now, then keep it fresh on a thread."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self.write()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """Stop the thread and remove the file: a stopped process has no status."""
        self._stopping.set()
        self._thread.join(timeout=5)
        self._path.unlink(missing_ok=True)

    def write(self) -> None:
        """Write the status once, atomically (a reader never sees half a file)."""
        status = status_of(self._component, self._outages())
        temporary = self._path.with_suffix(f".tmp{threading.get_ident()}")
        temporary.write_text(json.dumps({
            "component": status.component, "pid": status.pid, "host": socket.gethostname(),
            "written_at": status.written_at, "started_at": status.started_at,
            "down": status.down,
        }))
        os.replace(temporary, self._path)

    def _run(self) -> None:
        while not self._stopping.wait(self._refresh_s):
            try:
                self.write()
            except OSError as error:  # a full disk must not end the component
                log.warning("could not write the health status %s: %s", self._path, error)


def _read(path: Path) -> Status | None:
    try:
        data = json.loads(path.read_text())
        down = {str(server): float(seconds) for server, seconds in dict(data["down"]).items()}
        return Status(str(data["component"]), int(data["pid"]), float(data["written_at"]),
                      float(data["started_at"]), down)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # removed or being replaced meanwhile: its process stopped


def _started_at() -> float:
    return float(psutil.Process().create_time())


def _alive(status: Status) -> bool:
    """The process that wrote ``status`` still runs (not another one with its pid)."""
    try:
        started = psutil.Process(status.pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True
    return abs(started - status.started_at) < 1.0


# --- The supervisor's status (``stellwerk up``) ----------------------------------------


def write_crash_loops(path: Path, looping: dict[str, int]) -> None:
    """Record which supervised components are crash-looping (name → recent restarts).

    ``stellwerk up`` writes it whenever that changes; its API (``GET /healthz``) reads it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"crash_looping": looping, "written_at": time.time()}))
    os.replace(temporary, path)


def read_crash_loops(path: Path) -> dict[str, int]:
    """The crash-looping components :func:`write_crash_loops` recorded (none: no file)."""
    try:
        data = json.loads(path.read_text())
        return {str(name): int(count) for name, count in dict(data["crash_looping"]).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
