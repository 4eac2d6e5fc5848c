"""A database of the module's own for engine tests.

The e2e system's real engine and beat work on the session's database; a test here that
runs a global duty (``time_out_attempts`` with a clock ten minutes ahead) would time out
their attempts too, and see theirs among its own.
"""

from __future__ import annotations

import pytest

from common.config import Settings


@pytest.fixture(scope="module")
def quiet_settings(quiet_settings: Settings, own_database: str) -> Settings:
    """The parent's settings (a Redis database of the module's own) on ``own_database``."""
    return quiet_settings.model_copy(update={"database_url": own_database})
