"""Alembic environment: online migrations against the configured URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from common.persistence.models import Base

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "sqlalchemy.url is not set"
connectable = create_engine(url)
with connectable.connect() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
connectable.dispose()
