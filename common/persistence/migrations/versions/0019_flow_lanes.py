"""Flow slots shared by a lane of attempts that run one after another.

A lane's attempts hold a slot row on each key with ``lane`` set to its lead's task run;
a key's usage is the count of distinct lanes (``coalesce(lane, task_run_id)``), so an
admitted backlog of eight attempts in one lane takes one slot of a limit, not eight.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("flow_slots", sa.Column("lane", postgresql.UUID(as_uuid=True), nullable=True))


def downgrade() -> None:
    op.drop_column("flow_slots", "lane")
