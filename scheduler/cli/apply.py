"""``stellwerk apply``: jobs as code (issue 17).

    stellwerk apply jobs/                 # every *.yaml, *.yml and *.json in it, by name
    stellwerk apply nightly.yaml --dry-run

Each spec goes to ``PUT /jobs/{name}``: the job of that name is created, or changed
where it differs from the file, or left alone; what changed is printed, one line a
change (secrets sealed). Applying the same files again changes nothing, so a CI job can
apply a repository's jobs on every push. Every file is read before any is sent: one
that does not parse changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.text import Text

from scheduler.cli.client import (
    ApiUrlOption,
    DataDirOption,
    TokenOption,
    api_client,
    call,
    resolve_connection,
)
from scheduler.cli.errors import CliError, reporting_errors
from scheduler.cli.specfile import load_job_spec

PANEL = "Client"
SUFFIXES = (".yaml", ".yml", ".json")
MARKS = {"created": ("+", "green"), "updated": ("~", "yellow")}


def register(app: typer.Typer) -> None:
    """Add ``apply`` to the app."""
    app.command("apply", rich_help_panel=PANEL)(reporting_errors(apply))


def apply(
    paths: Annotated[list[Path], typer.Argument(
        help="Spec files, or directories of them (*.yaml, *.yml, *.json).", show_default=False)],
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what would change; change nothing.")] = False,
    api_url: ApiUrlOption = None, token: TokenOption = None, data_dir: DataDirOption = None,
) -> None:
    """Create or update jobs by name from spec files; print what changed."""
    specs = [(path, _named(path, load_job_spec(path))) for path in spec_files(paths)]
    console = Console()
    with api_client(resolve_connection(api_url, token, data_dir)) as http:
        for path, spec in specs:
            query = "?dry_run=true" if dry_run else ""
            answer = call(http, "PUT", f"/jobs/{quote(spec['name'], safe='')}{query}", spec)
            print_applied(console, path, answer)


def spec_files(paths: list[Path]) -> list[Path]:
    """The files named, and those of the directories named (sorted); at least one."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir()
                            if p.is_file() and p.suffix.lower() in SUFFIXES)
        else:
            files.append(path)
    if not files:
        raise CliError(f"no spec files (*.yaml, *.yml, *.json) in {', '.join(map(str, paths))}")
    return files


def print_applied(console: Console, path: Path, answer: dict[str, Any]) -> None:
    """``name (file): created`` and a line per change: ``~ tasks.b.retries: 2 -> 5``."""
    action = str(answer.get("action"))
    said = f"would be {action}" if answer.get("dry_run") and action != "unchanged" else action
    name = (answer.get("job") or {}).get("name") or path.stem
    console.print(Text.assemble((str(name), "bold"), f" ({path}): {said}"), soft_wrap=True)
    mark, style = MARKS.get(action, ("~", "yellow"))
    for change in answer.get("changes") or []:
        before, after = change.get("before"), change.get("after")
        if before is None:
            line = f"  + {change['path']}: {_json(after)}"
        elif after is None:
            line = f"  - {change['path']}: {_json(before)}"
        else:
            line = f"  {mark} {change['path']}: {_json(before)} -> {_json(after)}"
        console.print(Text(line, style=style if before is not None else "green"),
                      soft_wrap=True)
    if answer.get("run_id"):
        console.print(f"  run {answer['run_id']}")


def _named(path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise CliError(f"{path}: a spec needs a name: apply finds its job by it")
    return spec


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
