"""The one place where a failed command becomes a one-line message and an exit code."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.text import Text

P = ParamSpec("P")
R = TypeVar("R")


class CliError(Exception):
    """A failure the user can act on: shown as ``error: <message>``, no traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def reporting_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so a :class:`CliError` is printed on stderr as one line, then exits."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except CliError as error:
            message = " ".join(str(error).split())
            Console(stderr=True).print(Text(f"error: {message}", style="red"), soft_wrap=True)
            raise typer.Exit(error.exit_code) from None

    return wrapper
