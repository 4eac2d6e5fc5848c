"""Client commands that read what happened: ``runs JOB`` (a table) and ``logs RUN TASK``.

``logs -f`` follows the log while the task runs (``GET .../logs?follow=true``, a text
stream that ends when the task is done), like ``kubectl logs -f``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    resolve_connection,
)
from scheduler.cli.errors import reporting_errors
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.tables import FittedTable, LeaveOut, Squeeze
from scheduler.cli.views import format_time, state_text

PANEL = "Client"


def register(app: typer.Typer) -> None:
    """Add ``runs`` and ``logs`` to the app."""
    for command in (runs, logs):
        app.command(rich_help_panel=PANEL)(reporting_errors(command))


def runs(
    job: Annotated[str, typer.Argument(help="The job's id or name.", show_default=False)],
    *,
    limit: Annotated[int, typer.Option("--limit", help="How many runs, newest first.")] = 20,
    as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """List a job's runs (GET /jobs/{id}/runs): number, state, trigger, times."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        page = api.runs(job, limit=limit)
    if as_json:
        print_json(page)
        return
    Console().print(runs_table(list(page.get("data") or [])))


def runs_table(items: list[dict[str, Any]]) -> FittedTable:
    """A table of runs as ``GET /jobs/{id}/runs`` lists them; the ids always whole."""
    today = datetime.now(UTC).astimezone().date()
    # The times wrap (date over time) before ``scheduled for`` (mostly the start again)
    # and then the trigger are left out.
    table = FittedTable(
        ("#", "id", "state", "trigger", "scheduled for", "started", "finished"),
        give_way=(
            Squeeze("scheduled for", 10), Squeeze("started", 10), Squeeze("finished", 10),
            LeaveOut("scheduled for"), LeaveOut("trigger"),
        ),
        right=("#",),
    )
    for run in items:
        table.add_row(
            str(run.get("number", "")), str(run.get("id")), state_text(run.get("state")),
            str(run.get("trigger") or ""), format_time(run.get("scheduled_for"), today),
            format_time(run.get("started_at"), today), format_time(run.get("finished_at"), today),
        )
    return table


def logs(
    run: Annotated[str, typer.Argument(help="The run's id.", show_default=False)],
    task: Annotated[str, typer.Argument(help="The task's name (or id).", show_default=False)],
    *,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines until the task ends.")
    ] = False,
    attempt: Annotated[
        int | None, typer.Option("--attempt", help="Only this attempt.", show_default=False)
    ] = None,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Print a task's log (GET /runs/{id}/tasks/{task}/logs), raw, as the task wrote it.

    Each attempt's lines follow a header naming it (on stderr: stdout stays the log).
    """
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        if follow:
            _copy(api.follow_logs(run, task, attempt=attempt))
            return
        print_attempts(api.logs(run, task, attempt=attempt).get("lines") or [])


def print_attempts(lines: Sequence[Mapping[str, Any]]) -> None:
    """The lines on stdout, each attempt's after a header on stderr."""
    shown = None
    for line in lines:
        if line.get("attempt") != shown:
            shown = line.get("attempt")
            sys.stdout.flush()
            Console(stderr=True).print(Text(f"--- attempt {shown} ---", style="bold"))
        sys.stdout.write(f"{line.get('line', '')}\n")
    sys.stdout.flush()


def _copy(chunks: Iterator[str]) -> None:
    """Copy the followed log to stdout as it arrives."""
    for chunk in chunks:
        sys.stdout.write(chunk)
        sys.stdout.flush()
