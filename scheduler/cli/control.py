"""Run control from the terminal: the ``POST /runs/{id}/...`` actions of the REST API.

``cancel``, ``pause``, ``resume``, ``retry``, ``confirm``, ``reject`` and ``skip`` each
print the run's state after the action; a refusal (409 naming the state) or an unknown
run or task (404) is one line on stderr and exit code 1.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from scheduler.cli.client import (
    ApiUrlOption,
    Connection,
    DataDirOption,
    TokenOption,
    api_client,
    resolve_connection,
)
from scheduler.cli.errors import reporting_errors
from scheduler.cli.views import state_text
from stellwerk.client import RunAction

PANEL = "Run control"
RunArgument = Annotated[str, typer.Argument(help="The run's id.", show_default=False)]
TaskOption = Annotated[
    str | None,
    typer.Option("--task", help="Act on this task (its name or id) only.", show_default=False),
]
RequiredTask = Annotated[
    str, typer.Option("--task", help="The task (its name or id).", show_default=False)
]


def register(app: typer.Typer) -> None:
    """Add the run control commands to the app."""
    for command in (cancel, pause, resume, retry, confirm, reject, skip):
        app.command(rich_help_panel=PANEL)(reporting_errors(command))


def cancel(
    run: RunArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Cancel a run: unstarted tasks at once, running ones are told to stop."""
    _act(resolve_connection(api_url, token, data_dir), run, None, "cancel")


def pause(
    run: RunArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Pause a run: nothing new starts, running tasks finish."""
    _act(resolve_connection(api_url, token, data_dir), run, None, "pause")


def resume(
    run: RunArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Resume a paused run."""
    _act(resolve_connection(api_url, token, data_dir), run, None, "resume")


def retry(
    run: RunArgument, task: TaskOption = None, api_url: ApiUrlOption = None,
    token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Retry a failed run, or with --task one task and its descendants."""
    _act(resolve_connection(api_url, token, data_dir), run, task, "retry")


def confirm(
    run: RunArgument, task: TaskOption = None, api_url: ApiUrlOption = None,
    token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Confirm every task waiting for confirmation, or with --task that one."""
    _act(resolve_connection(api_url, token, data_dir), run, task, "confirm")


def reject(
    run: RunArgument, task: RequiredTask, api_url: ApiUrlOption = None,
    token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Reject a task waiting for confirmation: the run fails."""
    _act(resolve_connection(api_url, token, data_dir), run, task, "reject")


def skip(
    run: RunArgument, task: RequiredTask, api_url: ApiUrlOption = None,
    token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Skip a task: it counts as done for its successors."""
    _act(resolve_connection(api_url, token, data_dir), run, task, "skip")


def _act(connection: Connection, run: str, task: str | None, action: RunAction) -> None:
    with api_client(connection) as api:
        answer = api.act(run, action, task=task)
    Console().print(Text(f"run {answer.get('id', run)} ") + state_text(answer.get("state")))
