"""``stellwerk api``: serve the REST API with uvicorn."""

from __future__ import annotations

import uvicorn

from common.config import Settings
from scheduler.api.app import create_app

GRACEFUL_SHUTDOWN_S = 5
# How long an idle client connection is kept open. uvicorn's 5 s default closes
# connections that a busy client pool is about to reuse: a request written just as the
# server closes the socket fails with a read error on the client (the likely cause of
# the one ReadError in ``bench/api_load.py``). Longer than usual pools' idle limits.
KEEP_ALIVE_S = 75


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Run the API until interrupted (Ctrl-C or SIGTERM stop it cleanly)."""
    # Open event streams never end by themselves: on shutdown they get a few seconds.
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info",
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, timeout_keep_alive=KEEP_ALIVE_S)
