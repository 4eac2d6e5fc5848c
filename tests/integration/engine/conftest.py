"""A database of the module's own for engine tests.

The e2e system's real engine and beat work on the session's database; a test here that
runs a global duty (``time_out_attempts`` with a clock ten minutes ahead) would time out
their attempts too, and see theirs among its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from common.config import Settings
from common.persistence.migrate import upgrade
from tests.conftest import scratch_database


@pytest.fixture(scope="module")
def own_database(server_urls: tuple[str, str]) -> Iterator[str]:
    """A migrated scratch database, dropped after the module."""
    with scratch_database(server_urls[0]) as url:
        upgrade(url)
        yield url


@pytest.fixture(scope="module")
def quiet_settings(quiet_settings: Settings, own_database: str) -> Settings:
    """The parent's settings (a Redis database of the module's own) on ``own_database``."""
    return quiet_settings.model_copy(update={"database_url": own_database})
