"""The admin token of a ``stellwerk up`` installation, kept in ``<data-dir>/admin-token``.

``up`` generates it once, so a restart (and the client commands on the same machine)
find the same token; ``STELLWERK_ADMIN_TOKEN`` overrides it and is then never written.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from scheduler.cli.errors import CliError

TOKEN_FILE = "admin-token"


def admin_token_path(data_dir: Path) -> Path:
    """Where ``up`` keeps the generated admin token."""
    return data_dir / TOKEN_FILE


def load_or_create_admin_token(data_dir: Path, configured: SecretStr | None) -> str:
    """The configured token, else the stored one, else a new one stored with mode 0600."""
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    path = admin_token_path(data_dir)
    try:
        # O_EXCL: never overwrite a token that clients may already hold.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        stored = read_admin_token(data_dir)
        if stored is None:
            raise CliError(f"{path} is empty; delete it to generate a new token") from None
        return stored
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token + "\n")
    return token


def read_admin_token(data_dir: Path) -> str | None:
    """The stored admin token, or ``None`` if there is none."""
    try:
        token = admin_token_path(data_dir).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return token or None
