"""``stellwerk subscription list|create|delete``: who hears of which state changes.

    stellwerk subscription create --event 'run.*' --event task.failed \
        --webhook https://ops.example/hook --secret s3cret --job nightly
    stellwerk subscription list
    stellwerk subscription delete ID

A webhook's secret and header values are write-only: listed subscriptions show the
URL and the header names only.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    resolve_connection,
)
from scheduler.cli.errors import CliError
from scheduler.cli.groups import add_group
from scheduler.cli.jsonout import JsonOption, print_json
from scheduler.cli.tables import FittedTable, LeaveOut, Squeeze


def register(app: typer.Typer) -> None:
    """Add the ``subscription`` group to the app."""
    add_group(app, "subscription", "List, create and delete subscriptions to state changes.",
              {"list": list_, "create": create, "delete": delete})


def list_(
    *, as_json: JsonOption = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Every subscription you may see (GET /subscriptions): events, selector, target."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        page = api.subscriptions(limit=500)
    if as_json:
        print_json(page)
        return
    table = FittedTable(("id", "events", "selector", "target", "created by"),
                        give_way=(Squeeze("target", 20), Squeeze("selector", 12),
                                  LeaveOut("created by")))
    for row in page.get("data") or []:
        table.add_row(str(row["id"]), ", ".join(row.get("events") or []),
                      _selector(row.get("selector") or {}), _target(row.get("target") or {}),
                      str(row.get("created_by") or ""))
    Console().print(table)


def create(
    *,
    event: Annotated[list[str], typer.Option(
        "--event", help="An event name or pattern (run.*, task.failed); repeat for several.")],
    webhook: Annotated[str | None, typer.Option(
        "--webhook", help="POST each event to this URL.", show_default=False)] = None,
    secret: Annotated[str | None, typer.Option(
        "--secret", help="The webhook's signing secret.", show_default=False)] = None,
    celery_task: Annotated[str | None, typer.Option(
        "--celery-task", help="Send each event as this Celery task instead.",
        show_default=False)] = None,
    job: Annotated[str | None, typer.Option(
        "--job", help="Only this job's events (its id or name).", show_default=False)] = None,
    application: Annotated[str | None, typer.Option(
        "--application", help="Only jobs of this application.", show_default=False)] = None,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Subscribe a webhook or a Celery task to events (POST /subscriptions)."""
    if (webhook is None) == (celery_task is None):
        raise CliError("say where events go: --webhook URL or --celery-task NAME (one)")
    target: dict[str, Any] = (
        {"webhook": {"url": webhook, **({"secret": secret} if secret else {})}}
        if webhook is not None else {"celery_task": celery_task})
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        selector: dict[str, Any] = {"application": application} if application else {}
        if job is not None:
            selector["job_id"] = api.job(job)["id"]
        created = api.create_subscription(event, selector, target)
    Console().print(f"subscription {created.get('id')} created")


def delete(
    subscription: Annotated[str, typer.Argument(help="The subscription's id.")],
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Delete a subscription (DELETE /subscriptions/{id}): no more deliveries."""
    with api_client(resolve_connection(api_url, token, data_dir)) as api:
        api.delete_subscription(subscription)
    Console().print(f"subscription {subscription} deleted")


def _selector(selector: dict[str, Any]) -> str:
    given = [f"{key}={value}" for key, value in selector.items() if value is not None]
    return ", ".join(given) or "every job"


def _target(target: dict[str, Any]) -> str:
    hook = target.get("webhook")
    if hook:
        return str(hook.get("url"))
    return f"celery {target.get('celery_task')}" + (
        f" on {target['queue']}" if target.get("queue") else "")
