"""Run a fixed set of child processes, restart the ones that die, stop them all on request.

``stellwerk up`` runs each component as its own process, as compose or Kubernetes would,
so one that crashes is restarted without taking the others down. The way processes are
started is injected (:data:`StartProcess`) so the tests can supervise trivial commands.

A child restarted :class:`CrashLoop` ``restarts`` times within its ``window`` is
crash-looping: restarting it heals nothing. The supervisor says so once in its log
(and once when it has run a window without dying), and :meth:`Supervisor.crash_looping`
names such children, which ``stellwerk up`` shows on its console and hands to its API's
``GET /healthz`` through a status file (``common.health.write_crash_loops``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import IO

log = logging.getLogger(__name__)

#: Receives each line a child writes, with the child's name.
LineSink = Callable[[str, str], None]


@dataclass(frozen=True)
class ChildSpec:
    """What to run for one supervised child, under which name."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None


#: Starts one child; its stdout (carrying stderr too) must be a pipe for the output to be shown.
StartProcess = Callable[[ChildSpec], "subprocess.Popen[bytes]"]


def popen_child(spec: ChildSpec) -> subprocess.Popen[bytes]:
    """Start a child in its own process group, stderr merged into a stdout pipe.

    Its own process group, because a Ctrl-C in the terminal goes to the whole foreground
    group: the children would exit on their own SIGINT while the supervisor raced to
    restart them. This way only the supervisor sees it and stops the children in order.
    """
    return subprocess.Popen(
        spec.argv,
        env=dict(spec.env) if spec.env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,
    )


@dataclass(frozen=True)
class Backoff:
    """How long to wait before restarting a child that died.

    The delay doubles while a child keeps dying soon after each start, so a component
    that cannot start (say, a bad setting) does not spin; one that ran for ``stable_after``
    was healthy, and its next crash is restarted after ``initial`` again.
    """

    initial: timedelta = timedelta(milliseconds=500)
    maximum: timedelta = timedelta(seconds=30)
    stable_after: timedelta = timedelta(seconds=30)

    def next_delay(self, previous: timedelta | None, uptime: timedelta) -> timedelta:
        """The delay before the next start, given the last delay and how long the child ran."""
        if previous is None or uptime >= self.stable_after:
            return self.initial
        return min(previous * 2, self.maximum)


@dataclass(frozen=True)
class CrashLoop:
    """When restarts stop being recovery: ``restarts`` of them within ``window``."""

    restarts: int = 3
    window: timedelta = timedelta(minutes=1)

    def recent(self, restarted_at: Sequence[float], now: float) -> int:
        """How many of the restarts (monotonic seconds) fall within the window before ``now``."""
        since = now - self.window.total_seconds()
        return sum(1 for at in restarted_at if at > since)

    def looping(self, restarted_at: Sequence[float], now: float) -> bool:
        """Whether a child restarted at these instants is crash-looping at ``now``."""
        return self.recent(restarted_at, now) >= self.restarts


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL`` (Popen reports signals as -N)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


@dataclass
class _Child:
    spec: ChildSpec
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float = 0.0
    delay: timedelta | None = None
    restarts: int = 0
    readers: list[threading.Thread] = field(default_factory=list)
    restarted_at: deque[float] = field(default_factory=lambda: deque(maxlen=32))
    looping: bool = False


class Supervisor:
    """Keeps every child running until :meth:`stop`; streams their output to a sink.

    A monitor thread polls the children; the one that exited is started again after a
    :class:`Backoff` delay. :meth:`stop` sends SIGTERM to each child, waits up to a grace
    period, then kills what is left (with its process group).
    """

    def __init__(
        self,
        specs: Sequence[ChildSpec],
        sink: LineSink,
        *,
        start: StartProcess = popen_child,
        backoff: Backoff | None = None,
        poll_interval: timedelta = timedelta(milliseconds=200),
        clock: Callable[[], float] = time.monotonic,
        crash_loop: CrashLoop | None = None,
        on_crash_loops: Callable[[dict[str, int]], None] = lambda looping: None,
    ) -> None:
        """``on_crash_loops`` is told the crash-looping children whenever they change."""
        self._children = [_Child(spec) for spec in specs]
        self._sink = sink
        self._start = start
        self._backoff = backoff or Backoff()
        self._poll_s = poll_interval.total_seconds()
        self._clock = clock
        self._crash_loop = crash_loop or CrashLoop()
        self._on_crash_loops = on_crash_loops
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None

    def start(self) -> None:
        """Start every child and the monitor thread that restarts them."""
        with self._lock:
            now = self._clock()
            for child in self._children:
                self._spawn(child, now)
        self._monitor = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self._monitor.start()

    def restarts(self, name: str) -> int:
        """How many times the child called ``name`` was started again after dying."""
        return self._child(name).restarts

    def unsettled(self, settled: timedelta) -> dict[str, int]:
        """Children down, or up for less than ``settled``: name → restarts so far.

        A child that crashes at import (a missing dependency, say) dies within a second
        or two of every start; one up for ``settled`` has got past that.
        """
        with self._lock:
            now = self._clock()
            return {
                child.spec.name: child.restarts for child in self._children
                if child.process is None or now - child.started_at < settled.total_seconds()
            }

    def crash_looping(self) -> dict[str, int]:
        """Children crash-looping now: name → restarts within the window."""
        with self._lock:
            return self._looping(self._clock())

    def _looping(self, now: float) -> dict[str, int]:
        return {
            child.spec.name: self._crash_loop.recent(child.restarted_at, now)
            for child in self._children if self._crash_loop.looping(child.restarted_at, now)
        }

    def pid(self, name: str) -> int | None:
        """The process id of the running child called ``name``, if it is running."""
        process = self._child(name).process
        return process.pid if process is not None else None

    def stop(self, grace: timedelta = timedelta(seconds=10)) -> None:
        """Stop restarting, SIGTERM every child, SIGKILL those still alive after ``grace``."""
        with self._lock:
            self._stopping.set()
            running = [c for c in self._children if c.process is not None]
        if self._monitor is not None:
            self._monitor.join()
        for child in running:
            _send(child.process, signal.SIGTERM)
        deadline = self._clock() + grace.total_seconds()
        for child in running:
            self._await_exit(child, deadline, grace)
        for child in self._children:
            for reader in child.readers:
                reader.join(timeout=2.0)

    def _child(self, name: str) -> _Child:
        for child in self._children:
            if child.spec.name == name:
                return child
        raise KeyError(name)

    def _watch(self) -> None:
        while not self._stopping.wait(self._poll_s):
            with self._lock:
                if self._stopping.is_set():
                    return
                now = self._clock()
                for child in self._children:
                    self._check(child, now)
                self._note_crash_loops(now)

    def _note_crash_loops(self, now: float) -> None:
        """Log each child that starts or stops crash-looping; report the set when it changed."""
        changed = False
        for child in self._children:
            looping = self._crash_loop.looping(child.restarted_at, now)
            if looping == child.looping:
                continue
            child.looping, changed = looping, True
            if looping:
                log.warning(
                    "%s is crash-looping: restarted %d times within %.0f s; its output above "
                    "says why", child.spec.name, self._crash_loop.recent(child.restarted_at, now),
                    self._crash_loop.window.total_seconds(),
                )
            else:
                log.warning("%s is no longer crash-looping", child.spec.name)
        if changed:
            self._on_crash_loops(self._looping(now))

    def _check(self, child: _Child, now: float) -> None:
        if child.process is None:
            if now >= child.restart_at:
                child.restarts += 1
                child.restarted_at.append(now)
                log.info("restarting %s (restart %d)", child.spec.name, child.restarts)
                self._spawn(child, now)
            return
        code = child.process.poll()
        if code is not None:
            self._schedule_restart(child, now, describe_exit(code))

    def _spawn(self, child: _Child, now: float) -> None:
        child.started_at = now
        try:
            process = self._start(child.spec)
        except OSError as error:
            self._schedule_restart(child, now, f"could not be started ({error})")
            return
        child.process = process
        if process.stdout is not None:
            reader = threading.Thread(
                target=self._pump, args=(child.spec.name, process.stdout), daemon=True
            )
            reader.start()
            child.readers = [r for r in child.readers if r.is_alive()] + [reader]

    def _schedule_restart(self, child: _Child, now: float, why: str) -> None:
        uptime = timedelta(seconds=now - child.started_at)
        child.delay = self._backoff.next_delay(child.delay, uptime)
        child.process = None
        child.restart_at = now + child.delay.total_seconds()
        log.warning(
            "%s %s; restarting in %.1f s", child.spec.name, why, child.delay.total_seconds()
        )

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                self._sink(name, raw.decode("utf-8", "replace").rstrip("\r\n"))

    def _await_exit(self, child: _Child, deadline: float, grace: timedelta) -> None:
        process = child.process
        if process is None:
            return
        try:
            process.wait(timeout=max(0.0, deadline - self._clock()))
        except subprocess.TimeoutExpired:
            log.warning(
                "%s did not stop within %.0f s; killing it", child.spec.name, grace.total_seconds()
            )
            # Still unreaped, so its pid (= its process group id) cannot have been reused.
            _kill_group(process)
            process.wait()


def _send(process: subprocess.Popen[bytes] | None, signum: signal.Signals) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        return


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and whatever it started in its process group (e.g. pool processes)."""
    try:
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
            return
    except ProcessLookupError:
        return
    process.kill()
