"""``watch`` says when a task waits READY for a type that no live worker serves.

Without it ``submit --watch`` waited silently forever. The run and ``GET /processors``
come from the canned local server; time is a fake clock that the polls' sleeps advance,
so five seconds of waiting take none.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from scheduler.cli import runs
from scheduler.cli.watch import UnservedTypes, follow_run
from stellwerk.client import Client
from tests.unit.cli.test_cli_client import (
    JOB_ID,
    RUN_ID,
    RUN_PATH,
    a_run,
    no_ambient_config,
    stellwerk,
)

__all__ = ["no_ambient_config"]  # the autouse fixture, for these tests too

PROCESSORS = "/api/v1/processors"
NOOP_UNSERVED = {"data": [
    {"type": "noop", "served": False, "ready": 1, "workers": []},
    {"type": "shell", "served": True, "ready": 0, "workers": [{"name": "w1"}]},
]}  # fmt: skip
LINE = "waiting: no worker serves task type 'noop' (start one: stellwerk worker --types noop)"


class FakeClock:
    """Monotonic seconds that move only when the watcher sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def api(canned_api: Any) -> Iterator[Client]:
    with Client(canned_api.url, "t0k3n") as client:
        yield client


def watch_polling(api: Client, clock: FakeClock) -> tuple[str, list[float]]:
    """Follow the run by polling every 0.5 s; the output and when /processors was asked."""
    looked_at: list[float] = []

    def processors() -> dict[str, Any]:
        looked_at.append(clock.now)
        return api.processors()

    out = io.StringIO()
    follow_run(lambda: dict(api.run(RUN_ID)), Console(file=out, width=200),
               notice=UnservedTypes(processors, clock=clock), sleep=clock.sleep)
    return out.getvalue(), looked_at


def test_a_task_ready_for_5_s_of_an_unserved_type_is_said_once(
    canned_api: Any, api: Client
) -> None:
    ready = (200, a_run("ACTIVE", "READY", "WAITING"))  # extract: type noop
    canned_api.reply("GET", RUN_PATH, *[ready] * 16, (200, a_run("COMPLETED", "COMPLETED")))
    canned_api.reply("GET", PROCESSORS, (200, NOOP_UNSERVED))

    output, looked_at = watch_polling(api, FakeClock())

    assert output.count(LINE) == 1, output
    assert looked_at == [5.0]  # not before 5 s, and not again for a type already said
    assert len(canned_api.calls("GET", PROCESSORS)) == 1


def test_a_served_type_is_not_said_and_processors_is_asked_every_5_s(
    canned_api: Any, api: Client
) -> None:
    ready = (200, a_run("ACTIVE", "COMPLETED", "READY"))  # transform: type shell, served
    canned_api.reply("GET", RUN_PATH, *[ready] * 24, (200, a_run("COMPLETED", "COMPLETED")))
    canned_api.reply("GET", PROCESSORS, (200, NOOP_UNSERVED))

    output, looked_at = watch_polling(api, FakeClock())

    assert "waiting:" not in output
    assert looked_at == [5.0, 10.0]


def test_a_task_that_leaves_ready_in_time_costs_no_call(
    canned_api: Any, api: Client
) -> None:
    ready = (200, a_run("ACTIVE", "READY", "WAITING"))
    active = (200, a_run("ACTIVE", "ACTIVE", "WAITING"))
    canned_api.reply("GET", RUN_PATH, *[ready] * 8, *[active] * 12,
                     (200, a_run("COMPLETED", "COMPLETED", "COMPLETED")))

    output, looked_at = watch_polling(api, FakeClock())

    assert looked_at == [] and "waiting:" not in output


def test_a_failing_processors_call_does_not_stop_the_watch(
    canned_api: Any, api: Client
) -> None:
    ready = (200, a_run("ACTIVE", "READY"))
    canned_api.reply("GET", RUN_PATH, *[ready] * 24, (200, a_run("COMPLETED", "COMPLETED")))
    canned_api.reply("GET", PROCESSORS, (503, {"title": "Unavailable", "status": 503,
                                                "detail": "db down"}), (200, NOOP_UNSERVED))

    output, looked_at = watch_polling(api, FakeClock())

    assert looked_at == [5.0, 10.0]  # asked again after the failure, then said
    assert output.count(LINE) == 1


def test_the_type_is_said_while_the_event_stream_is_quiet() -> None:
    # A READY task sends no event: the notice must come while the stream is silent.
    noticed = threading.Event()

    def events() -> Iterator[None]:
        yield  # subscribed
        noticed.wait(10)
        yield  # the run's next event, once the line is out

    def fetch() -> dict[str, Any]:
        done = noticed.is_set()
        return a_run("COMPLETED", "COMPLETED") if done else a_run("ACTIVE", "READY")

    def processors() -> dict[str, Any]:
        noticed.set()
        return NOOP_UNSERVED

    out = io.StringIO()
    notice = UnservedTypes(processors, after=timedelta(milliseconds=50))
    final = follow_run(fetch, Console(file=out, width=200), events=events, notice=notice,
                       tick=timedelta(milliseconds=10))

    assert final["state"] == "COMPLETED"
    assert out.getvalue().count(LINE) == 1


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI looks at once instead of after 5 s (its polls are real time)."""
    monkeypatch.setattr(runs, "UnservedTypes", partial(UnservedTypes, after=timedelta(0)))


@pytest.mark.usefixtures("no_grace")
def test_watch_prints_the_line_and_keeps_watching(canned_api: Any) -> None:
    ready = (200, a_run("ACTIVE", "READY", "WAITING"))
    canned_api.reply("GET", RUN_PATH, ready, ready, (200, a_run("COMPLETED", "COMPLETED")))
    canned_api.reply("GET", PROCESSORS, (200, NOOP_UNSERVED))

    result = stellwerk(canned_api.url, "watch", RUN_ID, columns=80)

    assert result.exit_code == 0, result.output
    assert result.output.count(LINE) == 1
    assert "1/1 tasks" in result.output  # it went on watching until the run ended


@pytest.mark.usefixtures("no_grace")
def test_submit_watch_prints_the_line(canned_api: Any, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: once\ntasks:\n  - name: extract\n    type: noop\n")
    created = {"id": JOB_ID, "name": "once", "state": "READY", "run_id": RUN_ID}
    canned_api.reply("POST", "/api/v1/jobs", (201, created))
    canned_api.reply("GET", RUN_PATH, (200, a_run("ACTIVE", "READY")),
                     (200, a_run("COMPLETED", "COMPLETED")))
    canned_api.reply("GET", PROCESSORS, (200, NOOP_UNSERVED))

    result = stellwerk(canned_api.url, "submit", str(spec), "--watch")

    assert result.exit_code == 0, result.output
    assert result.output.count(LINE) == 1
