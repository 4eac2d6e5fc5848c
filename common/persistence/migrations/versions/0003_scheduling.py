"""scheduling and run control: cron fires, timers of runs and attempts

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa  # noqa: F401 - used by the sections below as they are filled in
from alembic import op  # noqa: F401

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Each section is owned by one change; keep them apart.
    # -- cron fires --
    # -- run control timers (cancel grace, run timeout) --
    # -- suspension, lateness, lost attempts --
    pass


def downgrade() -> None:
    # In the reverse order of upgrade().
    # -- suspension, lateness, lost attempts --
    # -- run control timers (cancel grace, run timeout) --
    # -- cron fires --
    pass
