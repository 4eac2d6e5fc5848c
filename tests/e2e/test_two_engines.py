"""Many joins whose predecessors finish together, with two engine processes running."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import System, journal, submit, wait_run

pytestmark = pytest.mark.e2e
DIAMONDS = 60


@pytest.fixture
def second_engine(system: System) -> Iterator[None]:
    env = dict(system.env)
    system.env["STELLWERK_ENGINE_BATCH_SIZE"] = "1"  # one message per batch: most interleaving
    try:
        system.start("engine-2", "engine")
    finally:
        system.env.clear()
        system.env.update(env)
    yield
    system.stop("engine-2")


def test_joins_are_dispatched_once_with_two_engines(api: httpx.Client, second_engine: None) -> None:
    tasks: list[dict[str, Any]] = []
    for i in range(DIAMONDS):
        tasks += [
            {"name": f"s{i}", "type": "noop", "next": [f"a{i}", f"b{i}"]},
            {"name": f"a{i}", "type": "noop", "next": [f"j{i}"]},
            {"name": f"b{i}", "type": "noop", "next": [f"j{i}"]},
            {"name": f"j{i}", "type": "noop"},
        ]
    job = submit(api, {"name": "two-engines", "tasks": tasks})
    run = wait_run(api, job["run_id"], timeout_s=120)
    assert run["state"] == "COMPLETED"
    entries = journal(api, job["run_id"])
    ready = Counter(e["task"] for e in entries if e["task"] and e["to"] == "READY")
    assert all(ready[f"j{i}"] == 1 for i in range(DIAMONDS)), ready
    assert sum(ready.values()) == 4 * DIAMONDS
