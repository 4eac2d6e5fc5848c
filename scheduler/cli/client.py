"""Talking to the REST API from the client commands: connection options, calls, errors.

The API's URL comes from ``--api-url``, else ``STELLWERK_API_URL``, else the URL a
running ``stellwerk up`` wrote to ``<data-dir>/api-url``, else http://127.0.0.1:8080.
The token comes from ``--token``, else ``STELLWERK_TOKEN``, else the admin token that
``stellwerk up`` stored in ``<data-dir>/admin-token``. So on the machine running ``up``
the client commands work without any setup, whatever port it serves on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from common.config import load_settings
from scheduler.cli.admin_token import read_admin_token
from scheduler.cli.errors import CliError
from scheduler.cli.served_url import read_served_url, served_url_path

API_PREFIX = "/api/v1"

ApiUrlOption = Annotated[
    str | None,
    typer.Option(
        "--api-url",
        help="Base URL of the Stellwerk API (default: $STELLWERK_API_URL, else the URL a "
        "running `stellwerk up` wrote to <data-dir>/api-url, else http://127.0.0.1:8080).",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="API token (default: $STELLWERK_TOKEN, else <data-dir>/admin-token if it exists).",
        show_default=False,
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Where `stellwerk up` keeps its data, to find the admin token "
        "(default: $STELLWERK_DATA_DIR or ./.stellwerk).",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class Connection:
    """Where the API is, which token to send, and where the URL came from (for errors)."""

    api_url: str
    token: str | None
    url_from: str = "--api-url"

    @property
    def base_url(self) -> str:
        """The URL the API paths are relative to, e.g. ``http://127.0.0.1:8080/api/v1``."""
        root = self.api_url.rstrip("/")
        return root if root.endswith(API_PREFIX) else root + API_PREFIX


def resolve_connection(api_url: str | None, token: str | None, data_dir: Path | None) -> Connection:
    """Fill what the options left out from the environment, then from the data dir."""
    settings = load_settings()
    data_dir = data_dir or settings.data_dir
    if token is None and settings.token is not None:
        token = settings.token.get_secret_value()
    if token is None:
        token = read_admin_token(data_dir)
    if api_url is not None:
        return Connection(api_url, token)
    if "api_url" in settings.model_fields_set:
        return Connection(settings.api_url, token, "STELLWERK_API_URL")
    served = read_served_url(data_dir)
    if served is not None:
        return Connection(served, token, str(served_url_path(data_dir)))
    return Connection(settings.api_url, token, "the default")


@contextmanager
def api_client(connection: Connection) -> Iterator[httpx.Client]:
    """An HTTP client bound to the API's base URL and carrying the token."""
    headers = {"Accept": "application/json"}
    if connection.token:
        headers["Authorization"] = f"Bearer {connection.token}"
    with httpx.Client(base_url=connection.base_url, headers=headers, timeout=30.0) as http:
        try:
            yield http
        except Unreachable as error:
            raise CliError(f"{error} (the URL is {connection.url_from}'s); is `stellwerk up` "
                           "running? Elsewhere pass --api-url or set STELLWERK_API_URL") from error


class Unreachable(CliError):
    """No answer from the API's address: a connection refused, a name unknown, a timeout."""


def call(http: httpx.Client, method: str, path: str, body: object = None) -> dict[str, Any]:
    """Send one request; return the JSON object answered ({} for 204), or raise ``CliError``."""
    try:
        response = http.request(method, path, json=body)
    except httpx.HTTPError as error:
        raise Unreachable(f"cannot reach the API at {http.base_url}: {error}") from error
    if response.is_error:
        raise CliError(problem_message(response))
    if response.status_code == 204:  # done, nothing to say (e.g. DELETE)
        return {}
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise CliError(f"unexpected answer from {method} {path}: {response.text[:200]!r}")
    return data


def problem_message(response: httpx.Response) -> str:
    """``404 run … not found`` from a problem+json body, else the status line."""
    try:
        problem = response.json()
    except ValueError:
        problem = None
    detail = _detail(problem) if isinstance(problem, dict) else None
    return f"{response.status_code} {detail or response.reason_phrase}"


def _detail(problem: dict[str, Any]) -> str | None:
    """The human part of a problem: ``detail``, a validation error list, or ``title``."""
    detail = problem.get("detail")
    if isinstance(detail, list):
        return "; ".join(_validation_error(item) for item in detail)
    if detail:
        return str(detail)
    title = problem.get("title")
    return str(title) if title else None


def _validation_error(item: object) -> str:
    """``tasks.0.type: …`` from one FastAPI/pydantic validation error."""
    if not isinstance(item, dict):
        return str(item)
    location = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
    message = str(item.get("msg", ""))
    return f"{location}: {message}" if location else message
