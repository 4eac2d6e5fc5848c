"""Client commands about jobs: ``jobs`` (a table), ``run-now``, and the ``job`` group.

``job commit|enable|disable|delete ID`` act on one job, as ``kubectl`` or ``gh`` group
the verbs of one kind of object; ``jobs`` and ``run-now`` stand beside ``submit``,
``show`` and ``watch``. A 4xx answer is one line on stderr and exit code 1.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

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
from scheduler.cli.groups import add_group
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.tables import FittedTable, LeaveOut, Squeeze
from scheduler.cli.views import format_time, state_text

PANEL = "Client"
JobArgument = Annotated[str, typer.Argument(help="The job's id or name.", show_default=False)]


def register(app: typer.Typer) -> None:
    """Add ``jobs``, ``run-now`` and the ``job`` group to the app."""
    app.command("jobs", rich_help_panel=PANEL)(reporting_errors(list_jobs))
    app.command("run-now", rich_help_panel=PANEL)(reporting_errors(run_now))
    add_group(app, "job", "Commit, enable, disable or delete a job.",
              {"commit": commit, "enable": enable, "disable": disable, "delete": delete})


def list_jobs(
    *,
    limit: Annotated[int, typer.Option("--limit", help="How many jobs, newest first.")] = 50,
    job_type: Annotated[
        str | None, typer.Option("--type", help="Only jobs of this type.", show_default=False)
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="key=value; repeat to require several.", show_default=False),
    ] = None,
    as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """List jobs (GET /jobs): id, name, state, schedule, enabled, version."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        page = api.jobs(limit=limit, job_type=job_type, labels=label or ())
    if as_json:
        print_json(page)
        return
    Console().print(jobs_table(list(page.get("data") or [])))


def run_now(
    job: JobArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Start a new run of the job now (POST /jobs/{id}/runs); print the run's id."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        run = api.run_now(job)
    Console().print(Text(f"run {run.get('id')} ") + state_text(run.get("state")))


def commit(
    job: JobArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Make a draft job live: a one-off job gets its run, a cron job its schedule."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        answer = api.commit(job)
    _print_job(answer)
    if answer.get("run_id"):
        Console().print(f"run {answer['run_id']}")


def enable(
    job: JobArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Let a cron job fire again, from now on (missed fires are not caught up)."""
    _set_enabled(resolve_connection(api_url, token, data_dir), job, enabled=True)


def disable(
    job: JobArgument, api_url: ApiUrlOption = None, token: TokenOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Stop a cron job from firing; runs already started go on."""
    _set_enabled(resolve_connection(api_url, token, data_dir), job, enabled=False)


def delete(
    job: JobArgument,
    force: Annotated[
        bool, typer.Option("--force", help="Cancel the job's unfinished runs first.")
    ] = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Delete a job with its runs and logs; refused while a run is unfinished, unless --force."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        api.delete_job(job, force=force)
    Console().print(f"job {job} deleted")


def jobs_table(jobs: list[dict[str, Any]]) -> FittedTable:
    """A table of jobs as ``GET /jobs`` lists them; the ids always whole."""
    today = datetime.now(UTC).astimezone().date()
    # The creation time wraps first (date over time), then the schedule, then the name;
    # past that the version and the creation time are left out, the enabled flag last.
    table = FittedTable(
        ("id", "name", "state", "schedule", "enabled", "version", "created"),
        give_way=(
            Squeeze("created", 10), Squeeze("schedule", 9), Squeeze("name", 8),
            LeaveOut("version"), LeaveOut("created"), LeaveOut("enabled"),
        ),
        right=("version",),
    )
    for job in jobs:
        table.add_row(
            str(job.get("id")), str(job.get("name")), state_text(job.get("state")),
            _schedule(job.get("schedule")), "yes" if job.get("enabled") else "no",
            str(job.get("version")), format_time(job.get("created_at"), today),
        )
    return table


def _schedule(schedule: object) -> str:
    if not isinstance(schedule, dict):
        return ""
    if schedule.get("cron"):
        return f"{schedule['cron']} ({schedule.get('timezone') or 'UTC'})"
    return f"at {schedule['at']}" if schedule.get("at") else "once"


def _set_enabled(connection: Connection, job: str, *, enabled: bool) -> None:
    with api_client(connection) as api:
        _print_job(api.patch_job(job, {"enabled": enabled}))


def _print_job(job: dict[str, Any]) -> None:
    enabled = "enabled" if job.get("enabled") else "disabled"
    Console().print(
        Text(f"job {job.get('id')} ({job.get('name')}) ") + state_text(job.get("state"))
        + Text(f", {enabled}, version {job.get('version')}")
    )
