"""``stellwerk api``: serve the REST API with uvicorn, in one process or several.

One process answers with one core at most (Python runs one thread at a time), so
``--workers N`` runs N processes on one socket, as uvicorn does; each builds its own app
(pool, Redis clients) from the environment, which the parent fills with the servers it
resolved (embedded ones included), so every process talks to the same PostgreSQL.
"""

from __future__ import annotations

import os

import uvicorn
from fastapi import FastAPI

from common.config import Settings, load_settings
from common.process import settle_garbage_collector
from scheduler.api.app import create_app

GRACEFUL_SHUTDOWN_S = 5
# How long an idle client connection is kept open. uvicorn's 5 s default closes
# connections that a busy client pool is about to reuse: a request written just as the
# server closes the socket fails with a read error on the client (the likely cause of
# the one ReadError in ``bench/api_load.py``). Longer than usual pools' idle limits.
KEEP_ALIVE_S = 75


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8080,
          workers: int = 1) -> None:
    """Run the API until interrupted (Ctrl-C or SIGTERM stop it cleanly).

    ``workers`` processes serve (0: one per core).
    """
    workers = workers or os.cpu_count() or 1
    # Open event streams never end by themselves: on shutdown they get a few seconds.
    options = {"host": host, "port": port, "log_level": "info",
               "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
               "timeout_keep_alive": KEEP_ALIVE_S,
               "access_log": settings.api_access_log}
    if workers == 1:
        app = create_app(settings)
        # A wide run's or job's read allocates ~100,000 objects: with the libraries'
        # objects walked by every full collection, GET of a 10,000-task run cost 217 ms
        # of CPU, 121 with them frozen (a job 588 -> 377 ms).
        settle_garbage_collector()
        uvicorn.run(app, **options)  # type: ignore[arg-type]
        return
    os.environ.update(_server_environment(settings))
    uvicorn.run(f"{__name__}:app_of_environment", factory=True, workers=workers,
                **options)  # type: ignore[arg-type]


def app_of_environment() -> FastAPI:
    """The app of one of several API processes, from ``STELLWERK_*`` (and ``OTEL_*``)."""
    from common.tracing import configure_tracing  # noqa: PLC0415

    configure_tracing("api")
    app = create_app(load_settings())
    settle_garbage_collector()
    return app


def _server_environment(settings: Settings) -> dict[str, str]:
    """The servers' URLs as variables, for processes that read their settings anew."""
    urls = {"STELLWERK_DATABASE_URL": settings.database_url,
            "STELLWERK_REDIS_URL": settings.redis_url}
    return {name: url for name, url in urls.items() if url}
