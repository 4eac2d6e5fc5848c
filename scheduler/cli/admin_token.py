"""The admin token of a ``stellwerk up`` installation, kept in ``<data-dir>/admin-token``.

``up`` generates it once, so a restart (and the client commands on the same machine)
find the same token; ``STELLWERK_ADMIN_TOKEN`` overrides it and is then never written.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from scheduler.cli.stored_secret import load_or_create

TOKEN_FILE = "admin-token"


def admin_token_path(data_dir: Path) -> Path:
    """Where ``up`` keeps the generated admin token."""
    return data_dir / TOKEN_FILE


def load_or_create_admin_token(data_dir: Path, configured: SecretStr | None) -> str:
    """The configured token, else the stored one, else a new one stored with mode 0600."""
    path = admin_token_path(data_dir)
    return load_or_create(path, configured, f"{path} is empty; delete it to generate a new token")


def read_admin_token(data_dir: Path) -> str | None:
    """The stored admin token, or ``None`` if there is none."""
    try:
        token = admin_token_path(data_dir).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return token or None
