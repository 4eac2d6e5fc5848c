"""flow control: limits, slots, waiters and starts (issue 16)

Revision ID: 0010
Revises: 0009

PostgreSQL is the record of flow control: a key's usage is the count of its
``flow_slots`` rows (one per attempt holding it), a rate's the count of its
``flow_starts`` in the window, and a held READY attempt has a ``flow_waiters`` row per
key it waits for, in the order it may start. Operators' limits and tenants' weights
are ``flow_limits`` rows; a task's own keys are rendered into ``tasks.flow`` when its
job is written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("tasks", sa.Column("flow", postgresql.JSONB(none_as_null=True), nullable=True))
    op.add_column("task_runs", sa.Column("waiting_for", sa.String(300), nullable=True))
    op.create_table(
        "flow_limits",
        sa.Column("key", sa.String(210), primary_key=True),
        sa.Column("limit", sa.Integer(), nullable=True),
        sa.Column("per_s", sa.Float(), nullable=True),
        sa.Column("weight", sa.Integer(), nullable=True),
        sa.Column("updated_at", TZ, server_default=sa.func.now(), nullable=False),
    )
    op.create_table(
        "flow_slots",
        sa.Column("key", sa.String(210), primary_key=True),
        sa.Column("task_run_id", sa.Uuid(), sa.ForeignKey("task_runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("at", TZ, nullable=False),
    )
    op.create_index("ix_flow_slots_task_run_id", "flow_slots", ["task_run_id"])
    op.create_table(
        "flow_waiters",
        sa.Column("key", sa.String(210), primary_key=True),
        sa.Column("task_run_id", sa.Uuid(), sa.ForeignKey("task_runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("run_id", sa.Uuid(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("stated_limit", sa.Integer(), nullable=True),
        sa.Column("stated_per_s", sa.Float(), nullable=True),
        sa.Column("seq", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("since", TZ, nullable=False),
    )
    op.create_index("ix_flow_waiters_task_run_id", "flow_waiters", ["task_run_id"])
    op.create_index("ix_flow_waiters_order", "flow_waiters",
                    ["key", "tenant", sa.text("priority DESC"), "seq"])
    op.create_table(
        "flow_starts",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("key", sa.String(210), nullable=False),
        sa.Column("at", TZ, nullable=False),
    )
    op.create_index("ix_flow_starts_key_at", "flow_starts", ["key", "at"])


def downgrade() -> None:
    op.drop_table("flow_starts")
    op.drop_table("flow_waiters")
    op.drop_table("flow_slots")
    op.drop_table("flow_limits")
    op.drop_column("task_runs", "waiting_for")
    op.drop_column("tasks", "flow")
