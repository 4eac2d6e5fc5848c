"""One command per component: api, engine, beat, notify, worker, connector, migrate.

Each builds its settings from the environment, lets :func:`common.embedded.ensure_servers`
fill in missing server URLs (so a component run alone on a laptop uses the embedded
servers under the data dir), and hands over to the component's entry point, which blocks
until SIGTERM or SIGINT. The entry points are imported inside the commands: the client
commands then start without loading FastAPI, Celery and SQLAlchemy.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console

from common.config import Settings, load_settings
from scheduler.cli.errors import reporting_errors

PANEL = "Components"
BUILTIN_TYPES = "noop,sleep,python,shell"

HostOption = Annotated[str, typer.Option(help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)]
WorkersOption = Annotated[int, typer.Option(
    help="Processes serving the API (0: one per core).", min=0, max=64)]


class Pool(StrEnum):
    """Celery execution pools a worker may use."""

    THREADS = "threads"
    PREFORK = "prefork"
    SOLO = "solo"


def register(app: typer.Typer) -> None:
    """Add the component commands to the app."""
    for command in (api, engine, beat, notify, worker, connector, migrate):
        app.command(rich_help_panel=PANEL)(reporting_errors(command))


def component_settings(component: str | None = None) -> Settings:
    """Settings from ``STELLWERK_*``, with embedded servers standing in for missing URLs.

    Tracing is set up here too, for ``component``, when the ``OTEL_*`` variables ask for
    it (``common.tracing``): every component's process starts through this.
    """
    from common.embedded import ensure_servers  # noqa: PLC0415
    from common.tracing import configure_tracing  # noqa: PLC0415

    if component is not None:
        configure_tracing(component)
    return ensure_servers(load_settings())


def api(host: HostOption = "127.0.0.1", port: PortOption = 8080,
        workers: WorkersOption = 1) -> None:
    """Serve the REST API and the web UI."""
    from scheduler.api.server import serve  # noqa: PLC0415

    serve(component_settings("api"), host, port, workers)


def engine() -> None:
    """Advance runs: consume activations and results, apply the state machines."""
    from scheduler.engine.main import run_engine  # noqa: PLC0415

    run_engine(component_settings("engine"))


def beat() -> None:
    """Tick every second: fire schedules, check leases and timeouts, relay the outbox."""
    from scheduler.beat.main import run_beat  # noqa: PLC0415

    run_beat(component_settings("beat"))


def notify() -> None:
    """Deliver state-change events to subscribers (webhooks, Celery tasks, the live stream)."""
    run_notify(component_settings("notify"))


def run_notify(settings: Settings) -> None:
    """Run the ``stellwerk notify`` process until SIGTERM or SIGINT: two components in one.

    The notify runner shares the process and its stop signal with the consumer of
    producers' requests (``stellwerk.jobs``). Neither package imports the other (the
    layers contract in pyproject.toml, issue 15): the process is composed here, in its
    entry point, as every process is composed in its own.
    """
    from common.health import health_dir  # noqa: PLC0415
    from scheduler.notify.egress_transport import webhook_client  # noqa: PLC0415
    from scheduler.notify.main import build_runner  # noqa: PLC0415
    from scheduler.producers.main import build_request_consumer  # noqa: PLC0415
    from scheduler.service import Together, configure_logging, run_until_signalled  # noqa: PLC0415

    configure_logging("notify")  # before the loops are built: nothing they log is lost
    with webhook_client(settings.egress, settings.webhook_timeout) as http:
        # Beside the runner: the consumer of producers' requests (``stellwerk.jobs``).
        loops = Together([build_runner(settings, http), build_request_consumer(settings)])
        run_until_signalled("notify", loops, health_dir=health_dir(settings.data_dir))


def worker(
    types: Annotated[
        str, typer.Option(help="Comma-separated task types whose queues this worker serves.")
    ] = BUILTIN_TYPES,
    concurrency: Annotated[int, typer.Option(help="Tasks run at the same time.", min=1)] = 16,
    pool: Annotated[Pool, typer.Option(help="Celery execution pool.")] = Pool.THREADS,
    imports: Annotated[
        list[str] | None,
        typer.Option(
            "--import",
            help="Module with your @processor functions to import first (repeatable).",
            show_default=False,
        ),
    ] = None,
    hostname: Annotated[
        str | None,
        typer.Option(help="Worker name (default: worker-<pid>@<host>).", show_default=False),
    ] = None,
) -> None:
    """Run tasks of the given types with their registered processors."""
    from workers.main import run_worker  # noqa: PLC0415

    run_worker(
        component_settings("worker"),
        parse_types(types),
        concurrency,
        pool.value,
        hostname,
        imports=imports or (),
    )


def connector(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of POST /invoke and GET /healthz.",
                                      min=1, max=65535)] = 8090,
    concurrency: Annotated[int, typer.Option(help="Calls in flight at once.", min=1)] = 500,
    hostname: Annotated[
        str | None,
        typer.Option(help="Connector name (default: connector-<pid>@<host>).", show_default=False),
    ] = None,
) -> None:
    """Run http and webservice tasks (many calls at once) and serve POST /invoke."""
    from connectors.main import run_connector  # noqa: PLC0415

    run_connector(component_settings("connector"), host, port, concurrency, hostname)


def migrate() -> None:
    """Bring the database schema up to date (Alembic upgrade to head)."""
    from common.persistence.migrate import upgrade  # noqa: PLC0415

    database_url, _ = component_settings().require_urls()
    upgrade(database_url)
    Console().print("database migrated to head")


def parse_types(value: str) -> list[str]:
    """``"noop, sleep"`` → ``["noop", "sleep"]``; at least one type is required."""
    types = [name.strip() for name in value.split(",") if name.strip()]
    if not types:
        raise typer.BadParameter("name at least one task type", param_hint="--types")
    return types
