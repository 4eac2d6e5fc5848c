"""state checks: the database refuses a state no code knows (issue 15)

Revision ID: 0009
Revises: 0008

States were plain strings: a typo in a hand-written statement, or a state renamed in
the code but not in old rows, would be stored and only fail when read. Each column
that holds a state now has a CHECK listing its values. The lists are written out here,
not imported: a migration must build the same schema whatever the code becomes;
``tests/integration/test_migrations.py`` holds them equal to the code's enums, so a
new state needs a migration of its own.

Added ``NOT VALID`` and validated in a second statement: validating takes only a
SHARE UPDATE EXCLUSIVE lock, so the engine keeps writing while old rows are checked.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

RUN_STATES = (
    "NEW", "READY", "ACTIVE", "CONFIRM", "PAUSE_REQUESTED", "PAUSED", "CANCEL_REQUESTED",
    "CANCELED", "COMPLETED", "FAILED", "TIMEOUT",
)
TASK_STATES = (
    "WAITING", "READY", "ACTIVE", "CONFIRM", "COMPLETED", "SOFT_FAILED", "FAILED", "TIMEOUT",
    "SKIPPED", "REJECTED", "CANCELED", "PAUSED",
)
# A journal entry names run or task states; a run's first entry comes from "".
JOURNAL_STATES = ("", *sorted(set(RUN_STATES) | set(TASK_STATES)))
DELIVERY_STATES = ("pending", "delivered", "dead")
FIRE_OUTCOMES = ("run", "skipped", "buffered")

CHECKS = (
    ("runs", "state", "state", RUN_STATES),
    ("task_runs", "state", "state", TASK_STATES),
    ("journal", "from_state", "from_state", JOURNAL_STATES),
    ("journal", "to_state", "to_state", JOURNAL_STATES),
    ("deliveries", "state", "state", DELIVERY_STATES),
    ("fires", "outcome", "outcome", FIRE_OUTCOMES),
)


def condition(column: str, values: tuple[str, ...]) -> str:
    """``column IN ('A', 'B', ...)`` (the values are fixed names, never input)."""
    listed = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({listed})"


def upgrade() -> None:
    for table, name, column, values in CHECKS:
        constraint = f"ck_{table}_{name}"
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {constraint} "
                   f"CHECK ({condition(column, values)}) NOT VALID")
        op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {constraint}")


def downgrade() -> None:
    for table, name, _, _ in reversed(CHECKS):
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT ck_{table}_{name}")
