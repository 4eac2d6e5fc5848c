"""flow waiters: one index led by the key, the primary key led by the attempt (issue 16)

Revision ID: 0014
Revises: 0013

``flow_waiters`` had two indexes led by ``key``: its primary key ``(key, task_run_id)``
and ``ix_flow_waiters_order``. A queue table's statistics are never right (it swings
from empty to thousands of rows between two ANALYZEs), and with both indexes costed
alike the generic plan of the admission's read could take the primary key and sort
every waiter of the key on each batch: 5-18 ms a call instead of 0.3 in one fan-out of
three (``bench/flow.py``). Led by ``task_run_id``, the primary key serves the lookups by
attempt that ``ix_flow_waiters_task_run_id`` served (dropped: one index fewer to keep
on every insert and delete), and the order index is the only one a read by key can use.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("pk_flow_waiters", "flow_waiters", type_="primary")
    op.create_primary_key("pk_flow_waiters", "flow_waiters", ["task_run_id", "key"])
    op.drop_index("ix_flow_waiters_task_run_id", "flow_waiters")


def downgrade() -> None:
    op.create_index("ix_flow_waiters_task_run_id", "flow_waiters", ["task_run_id"])
    op.drop_constraint("pk_flow_waiters", "flow_waiters", type_="primary")
    op.create_primary_key("pk_flow_waiters", "flow_waiters", ["key", "task_run_id"])
