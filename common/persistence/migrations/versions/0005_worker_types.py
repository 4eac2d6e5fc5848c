"""web-service worker types registered by name, task bindings, detached attempts

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_types",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("engine", sa.String(length=20), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("sealed_headers", sa.Text(), nullable=True),
        sa.Column("header_names", postgresql.ARRAY(sa.String(length=200)), nullable=False),
        sa.Column("job_template", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_worker_types"),
    )
    op.add_column("jobs", sa.Column("sealed_webservice_headers", sa.Text(), nullable=True))
    op.add_column(
        "tasks", sa.Column("binding", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column(
        "task_runs",
        sa.Column("detached", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("task_runs", "detached")
    op.drop_column("tasks", "binding")
    op.drop_column("jobs", "sealed_webservice_headers")
    op.drop_table("worker_types")
