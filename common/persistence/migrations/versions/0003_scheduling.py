"""scheduling and run control: cron fires, timers of runs and attempts

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# -- suspension, lateness, lost attempts --: due times of the beat's duties, each with a
# partial index so that finding what is due costs O(due).
DUE_COLUMNS = [
    ("task_runs", "claim_check_at"), ("task_runs", "deadline_at"),
    ("runs", "suspend_due_at"), ("runs", "resume_due_at"), ("runs", "late_at"),
]


def upgrade() -> None:
    # Each section is owned by one change; keep them apart.
    # -- cron fires --
    op.create_table(
        "fires",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("fire_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("trigger", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_fires_job_id_jobs",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_fires"),
        sa.UniqueConstraint("job_id", "fire_at", name="uq_fires_job_id"),
    )
    op.create_index("ix_fires_buffered", "fires", ["job_id"], unique=False,
                    postgresql_where=sa.text("outcome = 'buffered'"))
    # -- run control timers (cancel grace, run timeout) --
    op.add_column("runs", sa.Column("cancel_grace_sent_at", sa.DateTime(timezone=True),
                                    nullable=True))
    op.add_column("runs", sa.Column("timeout_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_runs_cancel_grace", "runs", ["cancel_requested_at"], unique=False,
        postgresql_where=sa.text("state = 'CANCEL_REQUESTED' AND cancel_grace_sent_at IS NULL"),
    )
    op.create_index(
        "ix_runs_timeout_at", "runs", ["timeout_at"], unique=False,
        postgresql_where=sa.text("timeout_at IS NOT NULL"),
    )
    # -- timed outbox rows --
    op.add_column("outbox", sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
    # -- last success kept with the job storage, off the job row the beat locks --
    for column in ("last_success_start", "last_success_finish"):
        op.add_column("job_storage", sa.Column(column, sa.DateTime(timezone=True), nullable=True))
        op.execute(f"UPDATE job_storage s SET {column} = j.{column} FROM jobs j WHERE j.id = s.job_id")
        op.drop_column("jobs", column)
    # -- suspension, lateness, lost attempts --
    for table, column in DUE_COLUMNS:
        op.add_column(table, sa.Column(column, sa.DateTime(timezone=True), nullable=True))
        op.create_index(
            f"ix_{table}_{column}", table, [column], unique=False,
            postgresql_where=sa.text(f"{column} IS NOT NULL"),
        )


def downgrade() -> None:
    # In the reverse order of upgrade().
    # -- suspension, lateness, lost attempts --
    for table, column in reversed(DUE_COLUMNS):
        op.drop_index(f"ix_{table}_{column}", table_name=table)
        op.drop_column(table, column)
    # -- last success kept with the job storage, off the job row the beat locks --
    for column in ("last_success_start", "last_success_finish"):
        op.add_column("jobs", sa.Column(column, sa.DateTime(timezone=True), nullable=True))
        op.execute(f"UPDATE jobs j SET {column} = s.{column} FROM job_storage s WHERE j.id = s.job_id")
        op.drop_column("job_storage", column)
    # -- timed outbox rows --
    op.drop_column("outbox", "due_at")
    # -- run control timers (cancel grace, run timeout) --
    op.drop_index("ix_runs_timeout_at", table_name="runs")
    op.drop_index("ix_runs_cancel_grace", table_name="runs")
    op.drop_column("runs", "timeout_at")
    op.drop_column("runs", "cancel_grace_sent_at")
    # -- cron fires --
    op.drop_index("ix_fires_buffered", table_name="fires")
    op.drop_table("fires")
