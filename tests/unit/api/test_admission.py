"""Admission: a request beyond the limit waits, one the event loop answers does not."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Receive, Scope, Send

from scheduler.api.admission import Admission, loop_reads

ON_LOOP = loop_reads("/api/v1")


def http(method: str, path: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "query_string": b""}


async def nothing() -> dict[str, Any]:
    return {"type": "http.request"}


async def ignore(message: Any) -> None:
    return None


def test_a_read_on_the_loop_goes_while_every_slot_is_taken() -> None:
    async def scenario() -> list[str]:
        release = asyncio.Event()
        answered: list[str] = []

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if (scope["method"], scope["path"]) == ("POST", "/api/v1/jobs"):  # holds the slot
                await release.wait()
            answered.append(f"{scope['method']} {scope['path']}")

        admission = Admission(app, limit=1, on_loop=ON_LOOP)
        holding = asyncio.create_task(admission(http("POST", "/api/v1/jobs"), nothing, ignore))
        await asyncio.sleep(0)
        await asyncio.wait_for(admission(http("GET", "/api/v1/runs/r1"), nothing, ignore), 1)
        await asyncio.wait_for(admission(http("GET", "/api/v1/jobs/j1"), nothing, ignore), 1)
        await asyncio.wait_for(admission(http("GET", "/api/v1/jobs"), nothing, ignore), 1)
        await asyncio.wait_for(admission(http("GET", "/api/v1/runs"), nothing, ignore), 1)
        for path in ("/api/v1/jobs/j1/runs", "/api/v1/jobs/j1/history", "/api/v1/runs/r1/journal"):
            await asyncio.wait_for(admission(http("GET", path), nothing, ignore), 1)
        waiting = [asyncio.create_task(admission(http(method, path), nothing, ignore))
                   for method, path in (("POST", "/api/v1/jobs/j1"),
                                        ("GET", "/api/v1/runs/r1/tasks/a/logs"),
                                        ("GET", "/api/v1/jobs/j1/runs/x"))]
        for _ in range(5):  # time enough to take a free slot: there is none
            await asyncio.sleep(0)
        assert not any(task.done() for task in waiting)
        assert answered == ["GET /api/v1/runs/r1", "GET /api/v1/jobs/j1", "GET /api/v1/jobs",
                            "GET /api/v1/runs", "GET /api/v1/jobs/j1/runs",
                            "GET /api/v1/jobs/j1/history", "GET /api/v1/runs/r1/journal"]
        release.set()
        await asyncio.wait_for(asyncio.gather(holding, *waiting), 1)
        return answered

    answered = asyncio.run(scenario())
    assert answered[7] == "POST /api/v1/jobs"
    assert sorted(answered[8:]) == [
        "GET /api/v1/jobs/j1/runs/x", "GET /api/v1/runs/r1/tasks/a/logs", "POST /api/v1/jobs/j1"]
