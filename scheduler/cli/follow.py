"""``stellwerk events``: the state changes as they happen, one line each (issue 17).

    stellwerk events                 # everything you may see, until Ctrl-C
    stellwerk events --job nightly   # one job's
    stellwerk events --run RUN       # one run's: what happened so far, then live, until it ends

``--json`` prints each event as one line of JSON (as webhooks get it), for scripts.
"""

from __future__ import annotations

import json
from datetime import datetime
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
from scheduler.cli.jsonout import JsonOption
from scheduler.cli.views import state_text
from stellwerk.client import StreamBroken

PANEL = "Client"


def register(app: typer.Typer) -> None:
    """Add ``events`` to the app."""
    app.command("events", rich_help_panel=PANEL)(reporting_errors(events))


def events(
    *,
    run: Annotated[str | None, typer.Option(
        "--run", help="One run's events: those so far, then live until it ends.",
        show_default=False)] = None,
    job: Annotated[str | None, typer.Option(
        "--job", help="One job's events (its id or name).", show_default=False)] = None,
    as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Print state changes as they happen (GET /events); Ctrl-C stops."""
    console = Console()
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        job_id = str(api.job(job)["id"]) if job is not None else None
        try:
            with api.events(run_id=run, job_id=job_id) as stream:
                for event in stream:
                    if as_json:
                        typer.echo(json.dumps(event, ensure_ascii=False))
                    else:
                        console.print(event_line(event), soft_wrap=True)
        except StreamBroken as error:
            raise CliError(f"the event stream broke off: {error.reason}") from error
        except KeyboardInterrupt:
            return


def event_line(event: dict[str, Any]) -> Text:
    """``21:04:05 task.completed nightly fetch (attempt 1) COMPLETED``."""
    at = event.get("at")
    when = datetime.fromisoformat(at).astimezone().strftime("%H:%M:%S") if at else "--:--:--"
    subject = event.get("job_name") or ""
    if event.get("task"):
        subject += f" {event['task']} (attempt {event.get('attempt')})"
    line = Text(f"{when} {event.get('event')} {subject} ")
    if event.get("state"):
        line.append_text(state_text(event["state"]))
    if event.get("reason"):
        line.append(f" {event['reason']}", style="dim")
    return line
