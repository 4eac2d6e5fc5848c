"""``stellwerk api``: the app is composed, then what it composed is kept out of the
garbage collector's walks before uvicorn serves (``common.process``)."""

from __future__ import annotations

import gc
import os
from typing import Any

import pytest
import uvicorn

from common.config import Settings
from scheduler.api import server


@pytest.mark.parametrize("workers", [1, 2])
def test_the_api_is_frozen_out_of_the_collector_before_it_serves(
    monkeypatch: pytest.MonkeyPatch, workers: int,
) -> None:
    frozen_when_served: list[int] = []

    def run(app: Any, **options: Any) -> None:
        if options.get("factory"):  # each of several processes composes its own app
            server.app_of_environment()
        frozen_when_served.append(gc.get_freeze_count())

    monkeypatch.setattr(uvicorn, "run", run)
    # Several processes get the servers through the environment: this test's own copy.
    monkeypatch.setattr(os, "environ", {**os.environ})
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        server.serve(Settings(), workers=workers)
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)

    assert len(frozen_when_served) == 1
    assert frozen_when_served[0] > 10_000  # FastAPI, pydantic, SQLAlchemy: ~100,000+
