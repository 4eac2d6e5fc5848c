"""``stellwerk limit list|set|delete``: operators' flow limits (issue 16).

stellwerk limit set type:render 10           # at most 10 render attempts at once
stellwerk limit set rate:github 100 --per 60 # at most 100 starts a minute
stellwerk limit set tenant:acme 50 --weight 3
stellwerk limit list
stellwerk limit delete type:render
"""

from __future__ import annotations

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
from scheduler.cli.groups import add_group
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.tables import FittedTable


def register(app: typer.Typer) -> None:
    """Add the ``limit`` group to the app."""
    add_group(app, "limit", "Concurrency and rate limits, tenants' weights.",
              {"list": list_, "set": set_, "delete": delete})


def list_(
    *, as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Every limited key with its limit and what holds or waits for it (GET /limits)."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        answer = api.limits()
    if as_json:
        print_json(answer)
        return
    limits = answer.get("data") or []
    table = FittedTable(("key", "limit", "per", "weight", "active", "waiting"),
                        right=("limit", "per", "weight", "active", "waiting"))
    for row in limits:
        table.add_row(str(row["key"]), _shown(row.get("limit")), _shown(row.get("per")),
                      _shown(row.get("weight")), str(row["active"]), str(row["waiting"]))
    Console().print(table)


def set_(
    key: Annotated[str, typer.Argument(help="type:NAME, tenant:NAME, key:NAME or rate:NAME.")],
    limit: Annotated[int | None, typer.Argument(help="Active attempts, or starts per window.")]
    = None,
    *,
    per: Annotated[float | None, typer.Option("--per", help="A rate's window, in seconds.",
                                               show_default=False)] = None,
    weight: Annotated[int | None, typer.Option("--weight", help="A tenant's share of turns.",
                                                show_default=False)] = None,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Set a key's limit (PUT /limits/KEY); it takes effect within a second."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        row = api.set_limit(key, limit, per=per, weight=weight)
    Console().print(f"{row['key']}: limit {_shown(row.get('limit'))}, "
                    f"{row['active']} active, {row['waiting']} waiting")


def delete(
    key: Annotated[str, typer.Argument(help="The limited key.")],
    *, api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Remove a key's limit (DELETE /limits/KEY)."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        api.delete_limit(key)
    Console().print(f"{key}: limit removed")


def _shown(value: object) -> str:
    return "—" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
