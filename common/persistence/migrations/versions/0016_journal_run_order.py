"""A run's journal indexed in its order, for pages of it (``GET /runs/{id}/journal``).

The journal was indexed by run only: a page after an entry read every entry of the run
and sorted them (40,000 for a 10,000-task fan-out). On ``(run_id, id)`` a page is a
short index range, and deleting a run's entries (retention) uses it as before.
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_journal_run_order", "journal", ["run_id", "id"])
    op.drop_index("ix_journal_run_id", "journal")


def downgrade() -> None:
    op.create_index("ix_journal_run_id", "journal", ["run_id"])
    op.drop_index("ix_journal_run_order", "journal")
