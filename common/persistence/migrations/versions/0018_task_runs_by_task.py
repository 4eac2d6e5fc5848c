"""Task runs indexed by their task.

``task_runs.task_id`` references ``tasks`` with ``ON DELETE CASCADE``: each task deleted
(a job deleted, or changed to drop tasks) had PostgreSQL look for its task runs with a
sequential scan of all of them, the largest table. With 250,000 task runs kept, deleting
a job of 102 tasks took 1.8 s (4 ms with the index); the time grew with the job's tasks
times the table's rows. Each task run written maintains one index more.
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_task_runs_task_id", "task_runs", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_task_runs_task_id", "task_runs")
