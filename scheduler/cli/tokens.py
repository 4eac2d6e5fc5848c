"""``stellwerk token create|list|revoke``: API tokens with scopes, maybe a tenant and expiry.

A new token's value is printed once, alone on stdout, so that ``TOKEN=$(stellwerk token
create ...)`` works; what it may do goes to stderr. The API stores only its hash, so
``list`` shows names, scopes and dates, never a value.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    resolve_connection,
)
from scheduler.cli.durations import parse_duration
from scheduler.cli.groups import add_group
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.tables import FittedTable, LeaveOut, Squeeze


def register(app: typer.Typer) -> None:
    """Add the ``token`` group to the app."""
    add_group(app, "token", "Create, list and revoke API tokens.",
              {"create": create, "list": list_, "revoke": revoke})


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
    expires_at = None if expires_in is None else datetime.now(UTC) + parse_duration(expires_in)
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        created = api.create_token(name, scope, tenant=tenant, expires_at=expires_at)
    bound = f"tenant {created.get('tenant')}" if created.get("tenant") else "every tenant"
    expiry = created.get("expires_at") or "never"
    Console(stderr=True).print(
        f"token {created.get('id')} ({created.get('name')}): scopes "
        f"{', '.join(created.get('scopes') or [])}, {bound}, expires {expiry}. "
        "Store it now: it cannot be shown again.", soft_wrap=True,
    )
    typer.echo(created.get("token"))


def list_(
    *, as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """The tokens you may see (GET /tokens): id, name, scopes, tenant, expiry; no values."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        page = api.tokens(limit=500)
    if as_json:
        print_json(page)
        return
    table = FittedTable(("id", "name", "scopes", "tenant", "expires", "created by"),
                        give_way=(Squeeze("name", 12), LeaveOut("created by")))
    for row in page.get("data") or []:
        table.add_row(str(row["id"]), str(row["name"]), ",".join(row.get("scopes") or []),
                      row.get("tenant") or "(any)", row.get("expires_at") or "never",
                      str(row.get("created_by") or ""))
    Console().print(table)


def revoke(
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID", help="The token's id.")],
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Revoke a token (DELETE /tokens/{id}): it is refused from the next request on."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        api.revoke_token(token_id)
    Console().print(f"token {token_id} revoked")
