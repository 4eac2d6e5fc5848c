"""consumed messages and run version

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "consumed_messages",
        sa.Column("message_id", sa.UUID(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_consumed_messages")),
    )
    op.create_index(op.f("ix_consumed_messages_at"), "consumed_messages", ["at"], unique=False)
    op.add_column("runs", sa.Column("version", sa.Integer(), server_default="0", nullable=False))
    op.add_column("runs", sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "cancel_requested_at")
    op.drop_column("runs", "version")
    op.drop_index(op.f("ix_consumed_messages_at"), table_name="consumed_messages")
    op.drop_table("consumed_messages")
