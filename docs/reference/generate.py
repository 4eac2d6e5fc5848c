"""Write the API and CLI references (``docs/reference/api.md``, ``cli.md``) from the code.

    .venv/bin/python docs/reference/generate.py          # rewrite both files
    .venv/bin/python docs/reference/generate.py --check  # exit 1 if either is stale

The API reference comes from the OpenAPI document the API serves (and the scope each
route requires, read off its dependencies); the CLI reference from the typer app. A test
runs ``--check``, so the references cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import typer
from fastapi.routing import APIRoute

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from common.config import Settings  # noqa: E402
from scheduler.api.app import create_app  # noqa: E402
from scheduler.api.routes import _PROBLEMS  # noqa: E402
from scheduler.cli.main import build_app  # noqa: E402

HERE = Path(__file__).resolve().parent
COMMON_ERRORS = {(str(code), answer["description"]) for code, answer in _PROBLEMS.items()}
METHODS = ("get", "post", "put", "patch", "delete")


def api_reference() -> str:
    """Markdown of every operation: method, path, scope, parameters, body, answers."""
    app = create_app(Settings(database_url="postgresql://unused", redis_url="redis://unused"))
    spec = app.openapi()
    scopes = _route_scopes(app.routes)
    lines = ["# REST API reference", "", "Generated from the OpenAPI document "
             "(`GET /api/v1/openapi.json`) by `docs/reference/generate.py`; do not edit.",
             "Errors are `application/problem+json`; every route but the health check and "
             "the web-service callbacks needs `Authorization: Bearer <token>`. Besides the "
             "answers listed, any route may answer:", "",
             *[f"- {code}: {answer['description']}" for code, answer in _PROBLEMS.items()],
             ""]
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                lines += _operation(method, path, item[method], scopes.get((method, path)))
    return "\n".join(lines).rstrip() + "\n"


def _route_scopes(routes: list[Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(method, path) → the scopes its ``scope(...)`` dependency asks for."""
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for route, path in _flat(routes):
        for dep in route.dependant.dependencies:
            required = getattr(dep.call, "required_scopes", None)
            if required:
                for method in route.methods or ():
                    found[(method.lower(), path)] = tuple(required)
    return found


def _flat(routes: list[Any]) -> list[tuple[APIRoute, str]]:
    """Every API route with its full path (FastAPI keeps included routers nested)."""
    flat: list[tuple[APIRoute, str]] = []
    for route in routes:
        if isinstance(route, APIRoute):
            flat.append((route, route.path))
        elif hasattr(route, "effective_route_contexts"):
            flat += [(ctx.original_route, ctx.path) for ctx in route.effective_route_contexts()
                     if isinstance(ctx.original_route, APIRoute)]
    return flat


def _operation(
    method: str, path: str, op: dict[str, Any], scopes: tuple[str, ...] | None
) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    summary = op.get("description") or op.get("summary") or ""
    if summary:
        lines += [summary.strip(), ""]
    if scopes:
        lines += [f"Scope: {' or '.join(f'`{s}`' for s in scopes)}.", ""]
    params = op.get("parameters") or []
    if params:
        lines += ["| parameter | in | required | description |", "|---|---|---|---|"]
        for param in params:
            text = (param.get("description") or "").replace("\n", " ")
            lines.append(f"| `{param['name']}` | {param['in']} | "
                         f"{'yes' if param.get('required') else 'no'} | {text} |")
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        ref = content.get("schema", {}).get("$ref", "")
        lines += [f"Body ({media}): `{ref.rsplit('/', 1)[-1] or 'object'}`.", ""]
    answers = ", ".join(
        f"{code} ({answer.get('description', '').rstrip('.')})"
        for code, answer in op.get("responses", {}).items()
        if (code, answer.get("description")) not in COMMON_ERRORS
    )
    return [*lines, f"Answers: {answers}.", ""]


def cli_reference() -> str:
    """Markdown of every command with its arguments and options."""
    command = typer.main.get_command(build_app())
    lines = ["# CLI reference", "", "Generated from the `stellwerk` command by "
             "`docs/reference/generate.py`; do not edit. `stellwerk COMMAND --help` says the "
             "same.", ""]
    lines += _commands(command, "stellwerk")
    return "\n".join(lines).rstrip() + "\n"


def _commands(command: Any, prefix: str) -> list[str]:
    """A section per command; typer vendors click, so groups are told by duck typing."""
    if hasattr(command, "list_commands"):
        context = command.context_class(command)
        out: list[str] = []
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                out += _commands(sub, f"{prefix} {name}")
        return out
    lines = [f"## `{prefix}`", "", (command.help or "").strip(), ""]
    rows = [_param_row(p) for p in command.params if p.name != "help"]
    if rows:
        lines += ["| argument / option | default | description |", "|---|---|---|", *rows, ""]
    return lines


def _param_row(param: Any) -> str:
    if param.param_type_name == "option":
        names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        text = (param.help or "").replace("\n", " ")
        envvar = f" (env `{param.envvar}`)" if param.envvar else ""
    else:
        names, text, envvar = f"`{(param.name or '').upper()}`", "", ""
    default = "" if param.default is None or param.required else f"`{param.default}`"
    return f"| {names} | {default} | {text}{envvar} |"


def main() -> None:
    """Rewrite the references, or with ``--check`` only compare them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Fail if a file is stale.")
    args = parser.parse_args()
    stale = []
    for name, text in (("api.md", api_reference()), ("cli.md", cli_reference())):
        path = HERE / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        sys.exit(f"stale: {', '.join(stale)}; run .venv/bin/python docs/reference/generate.py")


if __name__ == "__main__":
    main()
