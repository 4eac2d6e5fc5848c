"""Talking to the REST API from the client commands: connection options and errors.

The API's URL comes from ``--api-url``, else ``STELLWERK_API_URL``, else the URL a
running ``stellwerk up`` wrote to ``<data-dir>/api-url``, else http://127.0.0.1:8080.
The token comes from ``--token``, else ``STELLWERK_TOKEN``, else the admin token that
``stellwerk up`` stored in ``<data-dir>/admin-token``. So on the machine running ``up``
the client commands work without any setup, whatever port it serves on.

The commands call the API through :class:`stellwerk.client.Client` (what users' scripts
use too); :func:`api_client` gives them one and turns its errors into :class:`CliError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from common.config import load_settings
from scheduler.cli.admin_token import read_admin_token
from scheduler.cli.errors import CliError
from scheduler.cli.served_url import read_served_url, served_url_path
from stellwerk.client import Client, ClientError, Unreachable

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
def api_client(connection: Connection) -> Iterator[Client]:
    """A :class:`Client` of the connection's API; what it raises becomes a one-line error.

    An unreachable API also says where its URL came from and what to do, since a wrong
    or stale URL is the usual cause.
    """
    with Client(connection.api_url, connection.token) as api:
        try:
            yield api
        except Unreachable as error:
            raise CliError(f"{error} (the URL is {connection.url_from}'s); is `stellwerk up` "
                           "running? Elsewhere pass --api-url or set STELLWERK_API_URL") from error
        except ClientError as error:
            raise CliError(str(error)) from error
