"""Configuration from ``STELLWERK_*`` environment variables (pydantic-settings).

Built by :func:`load_settings` in each runtime's entry point, never at import time, so
that tests and ``stellwerk up`` can hand every process its own values.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything a Stellwerk process may be configured with."""

    model_config = SettingsConfigDict(env_prefix="STELLWERK_", extra="ignore")

    database_url: str | None = None
    redis_url: str | None = None
    data_dir: Path = Path(".stellwerk")
    admin_token: SecretStr | None = None
    secret_key: SecretStr | None = None
    api_url: str = "http://127.0.0.1:8080"
    token: SecretStr | None = None
    path_prefix: str = ""
    disable_cron: bool = False
    # How long an ACTIVE attempt may go without a heartbeat before it is presumed lost.
    lease_ttl: timedelta = timedelta(seconds=15)
    heartbeat_interval: timedelta = timedelta(seconds=3)
    cancel_grace: timedelta = timedelta(seconds=30)
    # The engine commits a batch when it holds this many messages or has waited this long.
    engine_batch_size: int = 500
    engine_batch_wait: timedelta = timedelta(milliseconds=5)
    beat_interval: timedelta = timedelta(seconds=1)

    def require_urls(self) -> tuple[str, str]:
        """Both server URLs; the caller must have resolved embedded servers first."""
        if not self.database_url or not self.redis_url:
            raise RuntimeError("STELLWERK_DATABASE_URL and STELLWERK_REDIS_URL are not resolved")
        return self.database_url, self.redis_url


def load_settings(**overrides: object) -> Settings:
    """Read the environment, with explicit overrides winning."""
    return Settings(**overrides)  # type: ignore[arg-type]
