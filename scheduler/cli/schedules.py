"""``stellwerk fire-times JOB``: when a cron job fires next, in its own time zone.

Each time is shown in the job's zone (what its cron expression means), with UTC beside
it (what the logs and the API say). Around a DST change the two differ by another hour,
which is the point of showing both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from zoneinfo import ZoneInfo

import typer
from rich.console import Console

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    resolve_connection,
)
from scheduler.cli.errors import reporting_errors
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.tables import FittedTable

PANEL = "Client"


def register(app: typer.Typer) -> None:
    """Add ``fire-times`` to the app."""
    app.command("fire-times", rich_help_panel=PANEL)(reporting_errors(fire_times))


def fire_times(
    job: Annotated[str, typer.Argument(help="The job's id or name.", show_default=False)],
    *,
    count: Annotated[int, typer.Option("--count", help="How many fire times.", min=1,
                                       max=1000)] = 10,
    after: Annotated[str | None, typer.Option(
        "--after", help="From this instant (ISO 8601); default: now.", show_default=False)] = None,
    as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """A cron job's next fire times (GET /jobs/{id}/fire-times), in its time zone and UTC."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        answer = api.fire_times(job, count=count, after=after)
    if as_json:
        print_json(answer)
        return
    console = Console()
    if not answer.get("cron"):
        console.print(f"{job} has no cron schedule: it runs when submitted, at its date, "
                      "or with `stellwerk run-now`", soft_wrap=True)
        return
    zone = str(answer.get("timezone") or "UTC")
    console.print(f"{answer['cron']} ({zone})", soft_wrap=True)
    table = FittedTable((zone, "UTC"))
    for at in answer.get("fire_times") or []:
        table.add_row(*local_and_utc(str(at), zone))
    console.print(table)


def local_and_utc(at: str, zone: str) -> tuple[str, str]:
    """``2026-03-29 03:30 CEST`` and ``2026-03-29 01:30`` for one instant."""
    instant = datetime.fromisoformat(at)
    local = instant.astimezone(ZoneInfo(zone))
    utc = instant.astimezone(ZoneInfo("UTC"))
    return f"{local:%Y-%m-%d %H:%M:%S %Z}", f"{utc:%Y-%m-%d %H:%M:%S}"
