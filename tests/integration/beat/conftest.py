"""A database of the module's own for beat tests.

The e2e system's real beat works on the session's database with the real clock: a
test that makes something due there races it for every row.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.persistence.db import make_engine, make_sessions


@pytest.fixture(scope="module")
def quiet_settings(quiet_settings: Settings, own_database: str) -> Settings:
    """The parent's settings (a Redis database of the module's own) on ``own_database``."""
    return quiet_settings.model_copy(update={"database_url": own_database})


@pytest.fixture(scope="module")
def sessions(own_database: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on ``own_database`` (test_crons overrides it with its own database)."""
    engine = make_engine(own_database)
    yield make_sessions(engine)
    engine.dispose()
