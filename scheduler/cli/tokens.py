"""``stellwerk token create``: an API token with scopes, maybe a tenant and an expiry.

The value is printed once, alone on stdout, so that ``TOKEN=$(stellwerk token create
...)`` works; what it may do goes to stderr. The API stores only its hash.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    call,
    resolve_connection,
)
from scheduler.cli.durations import parse_duration
from scheduler.cli.errors import reporting_errors

PANEL = "Client"


def register(app: typer.Typer) -> None:
    """Add the ``token`` group to the app."""
    group = typer.Typer(help="Create API tokens.", no_args_is_help=True)
    group.command("create")(reporting_errors(create))
    app.add_typer(group, name="token", rich_help_panel=PANEL)


def create(
    *,
    name: Annotated[str, typer.Option("--name", help="What the token is for.")],
    scope: Annotated[
        list[str],
        typer.Option("--scope", help="job, job.read or job.task; repeat for several."),
    ],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Bind the token to this tenant.", show_default=False),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option("--expires-in", help="e.g. 90m, 12h, 30d, 2w; default: never.",
                     show_default=False),
    ] = None,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Create an API token (POST /tokens) and print it: it is shown only this once."""
    body: dict[str, Any] = {"name": name, "scopes": scope, "tenant": tenant}
    if expires_in is not None:
        body["expires_at"] = (datetime.now(UTC) + parse_duration(expires_in)).isoformat()
    with api_client(resolve_connection(api_url, token, data_dir)) as http:
        created = call(http, "POST", "/tokens", body)
    bound = f"tenant {created.get('tenant')}" if created.get("tenant") else "every tenant"
    expiry = created.get("expires_at") or "never"
    Console(stderr=True).print(
        f"token {created.get('id')} ({created.get('name')}): scopes "
        f"{', '.join(created.get('scopes') or [])}, {bound}, expires {expiry}. "
        "Store it now: it cannot be shown again.", soft_wrap=True,
    )
    typer.echo(created.get("token"))
