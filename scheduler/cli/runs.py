"""Client commands about jobs and runs: ``submit``, ``show``, ``watch`` (over the REST API)."""

from __future__ import annotations

from pathlib import Path
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
from scheduler.cli.errors import CliError, reporting_errors
from scheduler.cli.events import run_events
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.specfile import load_job_spec
from scheduler.cli.views import run_view
from scheduler.cli.watch import UnservedTypes, exit_code, follow_run
from stellwerk.client import Client

PANEL = "Client"
RunArgument = Annotated[str, typer.Argument(help="The run's id.", show_default=False)]


def register(app: typer.Typer) -> None:
    """Add the client commands to the app."""
    for command in (submit, show, watch):
        app.command(rich_help_panel=PANEL)(reporting_errors(command))


def submit(
    file: Annotated[Path, typer.Argument(help="Job spec, YAML (or JSON with a .json suffix).")],
    watch: Annotated[
        bool, typer.Option("--watch", help="Follow the job's run until it ends.")
    ] = False,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create a job from a spec file (POST /jobs); print its id and its run's id."""
    spec = load_job_spec(file)
    console = Console()
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        job = api.submit(spec)
        run_id = job.get("run_id")
        console.print(f"job {job.get('id')} ({job.get('name')}) created, state {job.get('state')}")
        for warning in job.get("warnings") or ():
            console.print(Text(f"warning: {warning}", style="yellow"))
        if run_id:
            console.print(f"run {run_id}")
        if not watch:
            return
        if not run_id:
            raise CliError(
                f"job {job.get('id')} has no run to watch yet (state {job.get('state')})"
            )
        final = _follow(api, str(run_id), console)
    raise typer.Exit(exit_code(final))


def show(
    run: RunArgument,
    as_json: JsonOption = False,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Show a run (GET /runs/{id}): its state, progress and a table of its tasks."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        found = dict(api.run(run))
    if as_json:
        print_json(found)
        return
    Console().print(run_view(found))


def watch(
    run: RunArgument,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Follow a run live until it ends; exit 0 if it COMPLETED, else 1."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        final = _follow(api, run, Console())
    raise typer.Exit(exit_code(final))


def _follow(api: Client, run_id: str, console: Console) -> dict[str, Any]:
    """Follow the run live; say so when a task waits for a type no worker serves."""
    return follow_run(
        lambda: dict(api.run(run_id)), console,
        events=lambda: run_events(api, run_id),
        notice=UnservedTypes(api.processors),
    )
