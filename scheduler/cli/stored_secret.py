"""A value ``stellwerk up`` generates once and keeps in its data directory (mode 0600).

The admin token and the secret key must both outlive a restart: clients hold the
token, and stored secure params were sealed with the key. A configured value (from
the environment) wins and is then never written.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from scheduler.cli.errors import CliError


def load_or_create(path: Path, configured: SecretStr | None, when_empty: str) -> str:
    """The configured value, else the one stored at ``path``, else a new one stored there.

    ``when_empty`` is the error message for a stored file that is empty.
    """
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    try:
        # O_EXCL: never overwrite a value that was handed out or used.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        stored = path.read_text(encoding="utf-8").strip()
        if not stored:
            raise CliError(when_empty) from None
        return stored
    value = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(value + "\n")
    return value
