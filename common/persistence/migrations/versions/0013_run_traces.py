"""run traces: a run's W3C trace context (issue 17)

Revision ID: 0013
Revises: 0012

With tracing on (``common.tracing``), a run's spans in every process are children of
the context kept here, so that they form one trace. NULL while tracing is off.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("traceparent", sa.String(60), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "traceparent")
