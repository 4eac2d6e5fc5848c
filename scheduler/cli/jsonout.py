"""``--json`` on the read commands: the API's answer as it is, for scripts (``jq``).

A table is for people and gives way on a narrow terminal; the JSON is whole, stable
(the API's documented schemas) and written to stdout alone.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print the API's JSON answer instead of a table (all of it, for scripts).")]


def print_json(data: object) -> None:
    """``data`` as indented JSON on stdout."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))
