"""``stellwerk healthcheck COMPONENT``: the container health check of each component.

Compose (or Kubernetes) runs it inside the component's container; it exits 0 when the
component on this host is not riding out an outage and shows a recent sign of life in
Redis, and 1 with a one-line reason otherwise.

First the status files the component's processes keep under
``$STELLWERK_DATA_DIR/health`` (``common.health``): while one of them says Redis or
PostgreSQL is unreachable, or has not been rewritten for 15 s, the component is
unhealthy (so the check needs the component's data dir, e.g. the same
``STELLWERK_DATA_DIR``; with ``--host`` another host's files are not looked at). Then
the signs of life, the records the components keep anyway:

- ``engine``, ``beat``: their loop-timings hash (``common.messaging.loop_timings``),
  rewritten every 5 s also when idle, gone 30 s after the loop stops;
- ``worker``, ``connector``: their liveness record (``common.messaging.liveness``);
- ``notify``: Redis and PostgreSQL answer (the runner keeps no record of its own yet).

The API has its own HTTP health check (``GET /api/v1/healthz``).
"""

from __future__ import annotations

import socket
import time
from enum import StrEnum
from typing import Annotated

import redis
import typer
from sqlalchemy import text

from common.config import load_settings
from common.health import health_dir, read_statuses, verdict
from common.messaging.liveness import WORKER_KEY_PREFIX
from common.messaging.loop_timings import KEY_PREFIX as TIMINGS_PREFIX
from scheduler.cli.errors import CliError, reporting_errors


class Checked(StrEnum):
    """Components with a health check here."""

    ENGINE = "engine"
    BEAT = "beat"
    WORKER = "worker"
    CONNECTOR = "connector"
    NOTIFY = "notify"


_PATTERNS = {
    Checked.ENGINE: TIMINGS_PREFIX + "engine_batch:{host}:*",
    Checked.BEAT: TIMINGS_PREFIX + "beat_step:{host}:*",
    Checked.WORKER: WORKER_KEY_PREFIX + "*{host}*",
    Checked.CONNECTOR: WORKER_KEY_PREFIX + "*{host}*",
}


def register(app: typer.Typer) -> None:
    """Add ``healthcheck`` to the app (among the component commands)."""
    app.command(rich_help_panel="Components")(reporting_errors(healthcheck))


def healthcheck(
    component: Checked,
    host: Annotated[str | None, typer.Option(help="Look at this host (default: this one).")]
    = None,
) -> None:
    """Exit 0 if COMPONENT on this host is alive (for container health checks)."""
    settings = load_settings()  # never starts embedded servers: it only looks
    if host is None:
        statuses = read_statuses(health_dir(settings.data_dir), component.value)
        if (reason := verdict(component.value, statuses, time.time())) is not None:
            raise CliError(reason)
    if not settings.database_url or not settings.redis_url:
        raise CliError("set STELLWERK_DATABASE_URL and STELLWERK_REDIS_URL")
    database_url, redis_url = settings.database_url, settings.redis_url
    client = redis.Redis.from_url(redis_url, socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError as error:
        raise CliError(f"Redis does not answer: {error}") from error
    if component == Checked.NOTIFY:
        _check_database(database_url)
        return
    pattern = _PATTERNS[component].format(host=host or socket.gethostname())
    if next(client.scan_iter(match=pattern, count=1000), None) is None:
        raise CliError(f"no sign of life of the {component} on this host ({pattern})")


def _check_database(database_url: str) -> None:
    from common.persistence.db import make_engine  # noqa: PLC0415

    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as error:
        raise CliError(f"PostgreSQL does not answer: {error}") from error
    finally:
        engine.dispose()
