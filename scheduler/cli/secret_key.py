"""The secret key of a ``stellwerk up`` installation, kept in ``<data-dir>/secret-key``.

Secure params are sealed with it (``common.secure_params``), so it must outlive a
restart: a new key would leave every stored secret unreadable. ``up`` generates it
once, with mode 0600, like the admin token; ``STELLWERK_SECRET_KEY`` overrides it and
is then never written.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from scheduler.cli.errors import CliError

KEY_FILE = "secret-key"


def secret_key_path(data_dir: Path) -> Path:
    """Where ``up`` keeps the generated secret key."""
    return data_dir / KEY_FILE


def load_or_create_secret_key(data_dir: Path, configured: SecretStr | None) -> str:
    """The configured key, else the stored one, else a new one stored with mode 0600."""
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    path = secret_key_path(data_dir)
    try:
        # O_EXCL: never overwrite the key that the stored secrets were sealed with.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        stored = path.read_text(encoding="utf-8").strip()
        if not stored:
            raise CliError(
                f"{path} is empty; restore the key, or delete the file to generate a new "
                "one (secure params stored with the old key become unreadable)"
            ) from None
        return stored
    key = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(key + "\n")
    return key
