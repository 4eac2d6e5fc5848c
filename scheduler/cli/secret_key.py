"""The secret key of a ``stellwerk up`` installation, kept in ``<data-dir>/secret-key``.

Secure params are sealed with it (``common.secure_params``), so it must outlive a
restart: a new key would leave every stored secret unreadable. ``up`` generates it
once, with mode 0600, like the admin token; ``STELLWERK_SECRET_KEY`` overrides it and
is then never written.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from scheduler.cli.stored_secret import load_or_create

KEY_FILE = "secret-key"


def secret_key_path(data_dir: Path) -> Path:
    """Where ``up`` keeps the generated secret key."""
    return data_dir / KEY_FILE


def load_or_create_secret_key(data_dir: Path, configured: SecretStr | None) -> str:
    """The configured key, else the stored one, else a new one stored with mode 0600."""
    path = secret_key_path(data_dir)
    return load_or_create(path, configured, (
        f"{path} is empty; restore the key, or delete the file to generate a new one "
        "(secure params stored with the old key become unreadable)"
    ))
