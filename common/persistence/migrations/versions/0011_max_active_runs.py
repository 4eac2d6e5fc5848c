"""max active runs: a job's cap on unfinished runs (issue 16)

Revision ID: 0011
Revises: 0010

``jobs.max_active_runs`` (NULL: no cap) and an index on each job's unfinished runs,
which the beat counts before it starts another run of a capped job.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("max_active_runs", sa.Integer(), nullable=True))
    op.create_index("ix_runs_unfinished", "runs", ["job_id"],
                    postgresql_where=sa.text("finished_at IS NULL"))


def downgrade() -> None:
    op.drop_index("ix_runs_unfinished", table_name="runs")
    op.drop_column("jobs", "max_active_runs")
