"""The FastAPI application factory: ``create_app(settings)``.

Connections are opened in the lifespan and closed after it, so that creating an app
(in a test, or twice in one process) has no side effect until it is started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from anyio import to_thread
from fastapi import FastAPI

from common.config import Settings
from common.messaging.messages import utcnow
from common.tracing import tracing_on
from scheduler.api.admission import Admission, loop_reads
from scheduler.api.errors import install_error_handlers
from scheduler.api.limits import BodySizeLimit
from scheduler.api.openapi import openapi_document
from scheduler.api.request_spans import RequestSpans
from scheduler.api.resources import Clock, Resources
from scheduler.api.routes import api_router
from scheduler.api.routes.events import EVENTS_PATH, LiveEvents
from scheduler.api.web_ui import web_ui_router
from scheduler.services.limits import Limits

API_VERSION_PATH = "/api/v1"


def api_base(path_prefix: str) -> str:
    """``/api/v1`` behind ``STELLWERK_PATH_PREFIX`` (``"/stellwerk/"`` → ``/stellwerk/api/v1``)."""
    prefix = path_prefix.strip("/")
    return f"/{prefix}{API_VERSION_PATH}" if prefix else API_VERSION_PATH


# Sync routes' threads (and pooled connections) of one process.
# Python runs one of them at a time: more only contend for the GIL with the event loop,
# which answers the reads (``Resources.reads``). Measured with ``bench/api_load.py``
# (200 clients creating, reading, listing): 16 threads, 180-187 requests/s and a read's
# p99 386-732 ms; 4 threads, 212-232 requests/s and 15 ms. More cores: ``--workers``.
REQUEST_THREADS = 4
# Requests admitted at once (``Admission``): fewer than the threads, which leaves some
# for the API-token lookups of the reads the event loop answers. The machine's CPU is
# shared whatever the number; where the queue forms is what it decides. As creates got
# cheaper, more admitted let them take the loop's time from the reads: in that mix (two
# processes) a read's p99 was 317-345 ms with 4 admitted, 92-203 with 3, 12-13 with 2,
# at 1,150-1,260 requests/s with 2 or 3 (bench/README.md, 2026-11-29).
ADMITTED_REQUESTS = 2


def create_app(settings: Settings, *, clock: Clock = utcnow) -> FastAPI:
    """The REST API under ``<path_prefix>/api/v1``, OpenAPI at ``.../openapi.json``."""
    base = api_base(settings.path_prefix)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # As many request threads as pooled connections, and more than admitted requests
        # (see ``admission``): a request never waits for a connection or a thread while
        # holding the other.
        to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        resources = Resources.open(settings, clock, pool_size=REQUEST_THREADS)
        app.state.resources = resources
        await resources.open_reads()
        try:
            yield
        finally:
            await resources.close_reads()
            resources.close()

    app = FastAPI(
        title="Stellwerk", version="1", lifespan=lifespan,
        # No Swagger page: it loads its assets from a CDN, and nothing here may.
        openapi_url=f"{base}/openapi.json", docs_url=None, redoc_url=None,
    )
    # A valid 3.1 document that also says what the API refuses (scheduler.api.openapi).
    app.openapi = partial(openapi_document, app)  # type: ignore[method-assign]
    install_error_handlers(app)
    limits = Limits.of(settings)
    app.state.limits = limits
    app.state.supervisor_status = settings.supervisor_status  # GET /healthz, under ``up``
    app.state.retention_keep_runs = settings.retention_keep_runs  # POST /prune's default
    app.state.live_events = LiveEvents(settings.redis_url)
    # Streams hold no thread and no connection while they last: they take no slot; nor
    # do the reads the event loop answers (a job, a run, the lists of jobs and of runs).
    app.add_middleware(
        Admission, limit=ADMITTED_REQUESTS, exempt=(f"{base}{EVENTS_PATH}",),
        on_loop=loop_reads(base),
    )  # inside: bodies are read first
    app.add_middleware(BodySizeLimit, max_bytes=limits.max_body_bytes)
    if tracing_on():  # a span per request, the root of the traces of runs it creates
        app.add_middleware(RequestSpans)
    app.include_router(api_router(), prefix=base)
    prefix = base.removesuffix(API_VERSION_PATH)
    app.include_router(web_ui_router(prefix, base), prefix=prefix)
    return app
