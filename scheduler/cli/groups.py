"""A group of client commands (``stellwerk limit list|set|delete``), each reporting errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import typer

from scheduler.cli.errors import reporting_errors

PANEL = "Client"


def add_group(app: typer.Typer, name: str, help_text: str,
              commands: Mapping[str, Callable[..., None]]) -> None:
    """Add ``stellwerk NAME COMMAND`` for each command, in the help's client panel."""
    group = typer.Typer(help=help_text, no_args_is_help=True)
    for command_name, command in commands.items():
        group.command(command_name)(reporting_errors(command))
    app.add_typer(group, name=name, rich_help_panel=PANEL)
