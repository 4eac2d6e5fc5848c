"""Secure params sealed with a key derived from ``STELLWERK_SECRET_KEY``.

Why and how: docs/decisions.md, "Secure params".

A job's and a task's ``secure_params`` are sealed by the API when it writes them and
stay sealed in Postgres, in the outbox and in the dispatch messages on Redis; only the
worker that runs the attempt opens them. A sealed value is a Fernet token (AES-128-CBC
with a random IV and an HMAC-SHA256 over it): two writes of the same value differ, and a
token changed or opened with another key is refused, never decrypted to garbage.

The Fernet key is derived from the configured secret with HKDF-SHA256, so any string of
enough entropy may serve as ``STELLWERK_SECRET_KEY`` (``stellwerk up`` generates one).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

# Names the purpose of the derived key: another use of the same secret gets another key.
_KDF_INFO = b"stellwerk secure params v1"
_KEY_BYTES = 32


class SecretKeyError(Exception):
    """Secure params cannot be sealed or opened with this process's configuration."""


class NoSecretKey(SecretKeyError):
    """``STELLWERK_SECRET_KEY`` is not set."""

    def __init__(self) -> None:
        super().__init__(
            "secure params need STELLWERK_SECRET_KEY, which is not set on this "
            "process (stellwerk up generates one in its data directory)"
        )


class WrongSecretKey(SecretKeyError):
    """A sealed value was not written with this key, or was tampered with."""

    def __init__(self) -> None:
        super().__init__(
            "secure params cannot be decrypted: they were sealed with another "
            "STELLWERK_SECRET_KEY than this process's, or changed since"
        )


class SecretBox:
    """Seals and opens secure params; without a key it refuses both, loudly."""

    def __init__(self, secret_key: SecretStr | str | None) -> None:
        """Derive the Fernet key from ``secret_key`` (``None`` or empty: no key)."""
        raw = secret_key.get_secret_value() if isinstance(secret_key, SecretStr) else secret_key
        self._fernet = Fernet(_derive(raw)) if raw else None

    @property
    def has_key(self) -> bool:
        """Whether a secret key is configured."""
        return self._fernet is not None

    def seal(self, value: dict[str, Any]) -> str:
        """The sealed JSON text of ``value``: a new random IV on every call."""
        return self._require().encrypt(json.dumps(value).encode()).decode("ascii")

    def open(self, sealed: str) -> dict[str, Any]:
        """The value :meth:`seal` sealed; :class:`WrongSecretKey` if it cannot be."""
        try:
            plain = self._require().decrypt(sealed.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError) as error:
            raise WrongSecretKey() from error
        value = json.loads(plain)
        if not isinstance(value, dict):
            raise WrongSecretKey()
        return value

    def _require(self) -> Fernet:
        if self._fernet is None:
            raise NoSecretKey()
        return self._fernet


def _derive(secret_key: str) -> bytes:
    """A urlsafe-base64 Fernet key derived from the configured secret."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=_KEY_BYTES, salt=None, info=_KDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))
