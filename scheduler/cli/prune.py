"""``stellwerk prune --older-than 7d``: delete old history now, as the beat's retention does.

It asks the API (``POST /prune``), which deletes a few batches per call and says
whether more are left; the command calls again until none are, so a large backlog
is worked off in short requests and transactions.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    resolve_connection,
)
from scheduler.cli.durations import parse_duration
from scheduler.cli.errors import reporting_errors

PANEL = "Client"


def register(app: typer.Typer) -> None:
    """Add ``prune`` to the app."""
    app.command(rich_help_panel=PANEL)(reporting_errors(prune))


def prune(
    older_than: Annotated[str, typer.Option(
        "--older-than", help="Delete runs that finished longer ago than this: 90m, 12h, 7d, "
        "2w (0s: every finished run).", show_default=False)],
    *,
    keep_runs: Annotated[int | None, typer.Option(
        "--keep-runs", min=0, help="Keep each job's last this many runs (default: the "
        "API's STELLWERK_RETENTION_KEEP_RUNS, 10).", show_default=False)] = None,
    tenant: Annotated[str | None, typer.Option(
        "--tenant", help="Only this tenant's jobs (a tenant-bound token: its own only).",
        show_default=False)] = None,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Delete finished runs older than --older-than, with their task runs, logs and journal.

    Unfinished runs and each job's last runs stay. Needs a token with the job scope.
    """
    age = parse_duration(older_than, "--older-than", zero=True)
    runs = fires = 0
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        while True:
            answer = api.prune(age, keep_runs=keep_runs, tenant=tenant)
            runs, fires = runs + int(answer["runs"]), fires + int(answer["fires"])
            if not answer.get("more"):
                break
    whose = f"tenant {answer['tenant']}" if answer.get("tenant") else "every tenant"
    typer.echo(f"deleted {runs} runs that finished before {answer['cutoff']} and {fires} "
               f"cron fires ({whose}; each job's last {answer['keep_runs']} runs kept)")
