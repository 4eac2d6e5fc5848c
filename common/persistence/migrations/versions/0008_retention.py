"""retention: indexes on finished runs and on fires by time

Revision ID: 0008
Revises: 0007

Retention (issue 14) takes the oldest finished runs and the oldest fires in small
batches; without these indexes each batch would scan the whole table. Built
``CONCURRENTLY`` (outside the migration's transaction), so that upgrading a database
with years of history does not block the engine's writes while they are built.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.create_index(
            "ix_runs_finished_at", "runs", ["finished_at"], unique=False,
            postgresql_where=sa.text("finished_at IS NOT NULL"), postgresql_concurrently=True,
        )
        op.create_index(
            "ix_fires_fire_at", "fires", ["fire_at"], unique=False,
            postgresql_where=sa.text("outcome <> 'buffered'"), postgresql_concurrently=True,
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("ix_fires_fire_at", table_name="fires",
                      postgresql_concurrently=True)
        op.drop_index("ix_runs_finished_at", table_name="runs",
                      postgresql_concurrently=True)
