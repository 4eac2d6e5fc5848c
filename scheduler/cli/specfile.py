"""Reading a job spec file for ``stellwerk submit``: YAML, or JSON by its ``.json`` suffix.

The API checks the spec itself (and answers 422 naming the task at fault); here we only
make sure the file is a readable mapping, and say in one line where it is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from scheduler.cli.errors import CliError


def load_job_spec(path: Path) -> dict[str, Any]:
    """The job spec in ``path`` as a dict, or a ``CliError`` naming the file and the fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CliError(f"cannot read {path}: {_reason(error)}") from error
    data = _parse_json(path, text) if path.suffix.lower() == ".json" else _parse_yaml(path, text)
    if not isinstance(data, dict):
        kind = "an empty file" if data is None else f"a {type(data).__name__}"
        raise CliError(f"{path}: a job spec must be a mapping, found {kind}")
    return data


def _parse_json(path: Path, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CliError(
            f"{path}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        ) from error


def _parse_yaml(path: Path, text: str) -> object:
    # JSON in a .yaml file also parses: YAML 1.2 is a superset (tab indentation aside).
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise CliError(f"{path}: invalid YAML{where}: {error.problem or error.context}") from error
    except yaml.YAMLError as error:
        raise CliError(f"{path}: invalid YAML: {error}") from error


def _reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)
