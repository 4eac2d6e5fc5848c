"""At 80 columns the tables print ids whole, on one line, and let the wordy columns give way.

An id cut to ``48361243-6…`` cannot be pasted into the next command; a worker folded
into fragments cannot be read. These render the commands as a person at an 80-column
terminal sees them (``COLUMNS=80``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from scheduler.cli.tables import FittedTable, LeaveOut, Squeeze
from tests.unit.cli.test_cli_client import (
    JOB_ID,
    RUN_ID,
    RUN_PATH,
    a_run,
    no_ambient_config,
    stellwerk,
)

__all__ = ["no_ambient_config"]  # the autouse fixture, for these tests too

OTHER_JOB = "48361243-6f1c-4d2a-9c1e-0123456789ab"
OTHER_RUN = "9a0b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
WORKER = "worker-48213@d4f3c2a1b9e8"


def lines_of(output: str) -> list[str]:
    lines = output.splitlines()
    assert lines, "nothing printed"
    assert max(len(line) for line in lines) <= 80, output
    return lines


def whole_on_one_line(ident: str, output: str) -> None:
    assert any(ident in line for line in lines_of(output)), f"{ident} not whole:\n{output}"


def test_jobs_at_80_columns_prints_every_id_whole(canned_api: Any) -> None:
    jobs = [
        {"id": JOB_ID, "name": "nightly-export-of-the-warehouse-to-the-lake",
         "state": "SCHEDULED", "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
         "enabled": True, "version": 12, "created_at": "2025-03-01T10:00:00+00:00"},
        {"id": OTHER_JOB, "name": "once", "state": "CANCEL_REQUESTED", "schedule": None,
         "enabled": False, "version": 1, "created_at": "2025-03-02T11:30:00+00:00"},
    ]  # fmt: skip
    canned_api.reply("GET", "/api/v1/jobs?limit=50", (200, {"data": jobs, "next_cursor": None}))

    result = stellwerk(canned_api.url, "jobs", columns=80)

    assert result.exit_code == 0, result.output
    whole_on_one_line(JOB_ID, result.output)
    whole_on_one_line(OTHER_JOB, result.output)
    header = lines_of(result.output)[0]
    for column in ("id", "name", "state", "schedule"):
        assert column in header
    assert "CANCEL_REQUESTED" in result.output  # states do not wrap either


def test_runs_at_80_columns_prints_every_id_whole(canned_api: Any) -> None:
    runs = [
        {"number": n, "id": run_id, "state": "COMPLETED", "trigger": "schedule",
         "scheduled_for": "2025-03-01T10:00:00+00:00", "started_at": "2025-03-01T10:00:01+00:00",
         "finished_at": "2025-03-01T10:00:05+00:00"}
        for n, run_id in ((12, RUN_ID), (11, OTHER_RUN))
    ]  # fmt: skip
    path = f"/api/v1/jobs/{JOB_ID}/runs?limit=20"
    canned_api.reply("GET", path, (200, {"data": runs, "next_cursor": None}))

    result = stellwerk(canned_api.url, "runs", JOB_ID, columns=80)

    assert result.exit_code == 0, result.output
    whole_on_one_line(RUN_ID, result.output)
    whole_on_one_line(OTHER_RUN, result.output)
    assert "2025-03-01" in result.output and "10:00:01" in result.output


def a_busy_run() -> dict[str, Any]:
    run = a_run("FAILED", "COMPLETED", "FAILED", "CANCELED")
    for task in run["tasks"]:
        task["worker"] = WORKER
    run["tasks"][1]["message"] = "exit status 2: the command failed, see the task's log"
    return run


def test_show_at_80_columns_keeps_the_worker_readable(canned_api: Any) -> None:
    canned_api.reply("GET", RUN_PATH, (200, a_busy_run()))

    result = stellwerk(canned_api.url, "show", RUN_ID, columns=80)

    assert result.exit_code == 0, result.output
    whole_on_one_line(RUN_ID, result.output)
    whole_on_one_line(JOB_ID, result.output)
    whole_on_one_line(WORKER, result.output)  # the message took the squeeze
    for word in ("exit", "status", "2:", "command", "log"):
        assert word in result.output
    for name, state in (("extract", "COMPLETED"), ("transform", "FAILED"), ("load", "CANCELED")):
        assert any(name in line and state in line for line in lines_of(result.output))


def test_watch_at_80_columns_shows_the_run_id_and_the_worker_whole(canned_api: Any) -> None:
    canned_api.reply("GET", RUN_PATH, (200, a_busy_run()))

    result = stellwerk(canned_api.url, "watch", RUN_ID, columns=80)

    assert result.exit_code == 1, result.output  # the run FAILED
    whole_on_one_line(RUN_ID, result.output)
    whole_on_one_line(WORKER, result.output)


def test_a_wide_terminal_shows_every_column_unsqueezed(canned_api: Any) -> None:
    canned_api.reply("GET", RUN_PATH, (200, a_busy_run()))

    result = stellwerk(canned_api.url, "show", RUN_ID, columns=200)

    transform = next(line for line in result.output.splitlines() if "transform" in line)
    for cell in (WORKER, "2025-03-01 10:00:00", "2025-03-01 09:00:05",
                 "exit status 2: the command failed, see the task's log"):  # fmt: skip
        assert cell in transform


def render(table: FittedTable, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    with console.capture() as capture:
        console.print(table)
    return capture.get()


def test_a_column_is_left_out_only_when_squeezing_is_not_enough() -> None:
    table = FittedTable(("id", "note", "extra"), give_way=(Squeeze("note", 4), LeaveOut("extra")))
    table.add_row(RUN_ID, "a note in several words", "kept if it fits")

    wide, squeezed, narrow = render(table, 100), render(table, 70), render(table, 50)

    assert "extra" in wide.splitlines()[0] and "a note in several words" in wide
    assert "extra" in squeezed.splitlines()[0] and "kept if it fits" in squeezed
    assert "a note in several words" not in squeezed  # the note wrapped instead
    header = narrow.splitlines()[0]
    assert "extra" not in header and "kept if it fits" not in narrow and RUN_ID in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 50
    assert "left out" in " ".join(narrow.split()) and "--json" in narrow  # not silently
    assert "left out" not in wide and "left out" not in squeezed
