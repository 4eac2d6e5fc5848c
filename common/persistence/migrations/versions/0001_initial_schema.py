"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 02:46:53.701674
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _create_jobs()
    _create_outbox()
    _create_job_storage()
    _create_runs()
    _create_tasks()
    _create_journal()
    _create_task_edges()
    _create_task_runs()
    _create_task_logs()


def _create_jobs() -> None:
    """The ``jobs`` table and its indexes."""
    op.create_table(
        "jobs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("application", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("tenant", sa.String(length=200), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("params", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("secure_params", sa.Text(), nullable=True),
        sa.Column("spec", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("schedule", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("draft", sa.Boolean(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_finish", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_application"), "jobs", ["application"], unique=False)
    op.create_index(
        "ix_jobs_next_fire_at",
        "jobs",
        ["next_fire_at"],
        unique=False,
        postgresql_where=sa.text("next_fire_at IS NOT NULL"),
    )
    op.create_index(op.f("ix_jobs_tenant"), "jobs", ["tenant"], unique=False)
    op.create_index(op.f("ix_jobs_type"), "jobs", ["type"], unique=False)


def _create_outbox() -> None:
    """The ``outbox`` table and its indexes."""
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("queue", sa.String(length=200), nullable=False),
        sa.Column("task_name", sa.String(length=200), nullable=False),
        sa.Column("task_id", sa.String(length=200), nullable=True),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )


def _create_job_storage() -> None:
    """The ``job_storage`` table and its indexes."""
    op.create_table(
        "job_storage",
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_storage_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_storage")),
    )


def _create_runs() -> None:
    """The ``runs`` table and its indexes."""
    op.create_table(
        "runs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(length=20), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=False),
        sa.Column("activation_sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_runs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("job_id", "number", name=op.f("uq_runs_job_id")),
    )
    op.create_index(
        "ix_runs_due",
        "runs",
        ["scheduled_for"],
        unique=False,
        postgresql_where=sa.text("state = 'READY' AND activation_sent_at IS NULL"),
    )


def _create_tasks() -> None:
    """The ``tasks`` table and its indexes."""
    op.create_table(
        "tasks",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("params", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("secure_params", sa.Text(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("retry_backoff_s", sa.Float(), nullable=False),
        sa.Column("confirm", sa.Boolean(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_tasks_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("job_id", "name", name=op.f("uq_tasks_job_id")),
    )


def _create_journal() -> None:
    """The ``journal`` table and its indexes."""
    op.create_table(
        "journal",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("from_state", sa.String(length=20), nullable=False),
        sa.Column("to_state", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_journal_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_journal")),
    )
    op.create_index(op.f("ix_journal_run_id"), "journal", ["run_id"], unique=False)


def _create_task_edges() -> None:
    """The ``task_edges`` table and its indexes."""
    op.create_table(
        "task_edges",
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("from_task", sa.UUID(), nullable=False),
        sa.Column("to_task", sa.UUID(), nullable=False),
        sa.ForeignKeyConstraint(
            ["from_task"],
            ["tasks.id"],
            name=op.f("fk_task_edges_from_task_tasks"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_task_edges_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["to_task"], ["tasks.id"], name=op.f("fk_task_edges_to_task_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("from_task", "to_task", name=op.f("pk_task_edges")),
    )


def _create_task_runs() -> None:
    """The ``task_runs`` table and its indexes."""
    op.create_table(
        "task_runs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("task_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("base", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("output", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_task_runs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_task_runs_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_runs")),
        sa.UniqueConstraint("run_id", "name", name=op.f("uq_task_runs_run_id")),
    )
    op.create_index(
        "ix_task_runs_lease",
        "task_runs",
        ["lease_expires_at"],
        unique=False,
        postgresql_where=sa.text("lease_expires_at IS NOT NULL"),
    )
    op.create_index(
        "ix_task_runs_retry_at",
        "task_runs",
        ["retry_at"],
        unique=False,
        postgresql_where=sa.text("retry_at IS NOT NULL"),
    )


def _create_task_logs() -> None:
    """The ``task_logs`` table and its indexes."""
    op.create_table(
        "task_logs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("task_run_id", sa.UUID(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stream", sa.String(length=10), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_run_id"],
            ["task_runs.id"],
            name=op.f("fk_task_logs_task_run_id_task_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_logs")),
    )
    op.create_index(op.f("ix_task_logs_task_run_id"), "task_logs", ["task_run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_task_logs_task_run_id"), table_name="task_logs")
    op.drop_table("task_logs")
    op.drop_index(
        "ix_task_runs_retry_at",
        table_name="task_runs",
        postgresql_where=sa.text("retry_at IS NOT NULL"),
    )
    op.drop_index(
        "ix_task_runs_lease",
        table_name="task_runs",
        postgresql_where=sa.text("lease_expires_at IS NOT NULL"),
    )
    op.drop_table("task_runs")
    op.drop_table("task_edges")
    op.drop_index(op.f("ix_journal_run_id"), table_name="journal")
    op.drop_table("journal")
    op.drop_table("tasks")
    op.drop_index(
        "ix_runs_due",
        table_name="runs",
        postgresql_where=sa.text("state = 'READY' AND activation_sent_at IS NULL"),
    )
    op.drop_table("runs")
    op.drop_table("job_storage")
    op.drop_table("outbox")
    op.drop_index(op.f("ix_jobs_type"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_tenant"), table_name="jobs")
    op.drop_index(
        "ix_jobs_next_fire_at",
        table_name="jobs",
        postgresql_where=sa.text("next_fire_at IS NOT NULL"),
    )
    op.drop_index(op.f("ix_jobs_application"), table_name="jobs")
    op.drop_table("jobs")
