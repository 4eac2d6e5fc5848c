"""notify subscriptions and their webhook deliveries

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _create_subscriptions()
    _create_deliveries()
    _create_delivery_attempts()


def _create_subscriptions() -> None:
    """The ``subscriptions`` table and its indexes."""
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("events", postgresql.ARRAY(sa.String(length=200)), nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=True),
        sa.Column("job_type", sa.String(length=200), nullable=True),
        sa.Column("application", sa.String(length=200), nullable=True),
        sa.Column("tenant", sa.String(length=200), nullable=True),
        sa.Column("target", sa.String(length=20), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("sealed_secret", sa.Text(), nullable=True),
        sa.Column("sealed_headers", sa.Text(), nullable=True),
        sa.Column("header_names", postgresql.ARRAY(sa.String(length=100)), nullable=False),
        sa.Column("celery_task", sa.String(length=200), nullable=True),
        sa.Column("queue", sa.String(length=200), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_subscriptions_job_id_jobs",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_subscriptions"),
    )
    op.create_index("ix_subscriptions_job_id", "subscriptions", ["job_id"], unique=False)
    op.create_index("ix_subscriptions_tenant", "subscriptions", ["tenant"], unique=False)


def _create_deliveries() -> None:
    """The ``deliveries`` table and its indexes."""
    op.create_table(
        "deliveries",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("subscription_id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("event_id", sa.UUID(), nullable=False),
        sa.Column("event", sa.String(length=200), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claim", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["subscription_id"], ["subscriptions.id"],
            name="fk_deliveries_subscription_id_subscriptions", ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.UniqueConstraint("subscription_id", "event_id", name="uq_deliveries_subscription_id"),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["due_at"], unique=False,
                    postgresql_where=sa.text("state = 'pending'"))
    op.create_index("ix_deliveries_queue", "deliveries", ["subscription_id", "run_id", "seq"],
                    unique=False, postgresql_where=sa.text("state = 'pending'"))
    op.create_index("ix_deliveries_listing", "deliveries", ["subscription_id", "seq"],
                    unique=False)


def _create_delivery_attempts() -> None:
    """The ``delivery_attempts`` table and its indexes."""
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("delivery_id", sa.UUID(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["delivery_id"], ["deliveries.id"],
            name="fk_delivery_attempts_delivery_id_deliveries", ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_delivery_attempts"),
    )
    op.create_index("ix_delivery_attempts_delivery_id", "delivery_attempts", ["delivery_id"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_delivery_attempts_delivery_id", table_name="delivery_attempts")
    op.drop_table("delivery_attempts")
    op.drop_index("ix_deliveries_listing", table_name="deliveries")
    op.drop_index("ix_deliveries_queue", table_name="deliveries",
                  postgresql_where=sa.text("state = 'pending'"))
    op.drop_index("ix_deliveries_due", table_name="deliveries",
                  postgresql_where=sa.text("state = 'pending'"))
    op.drop_table("deliveries")
    op.drop_index("ix_subscriptions_tenant", table_name="subscriptions")
    op.drop_index("ix_subscriptions_job_id", table_name="subscriptions")
    op.drop_table("subscriptions")
