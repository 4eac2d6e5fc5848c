"""Flow rows without foreign keys; a task run's deletion takes them by a trigger (issue 16).

Every admitted attempt inserts a ``flow_slots`` row and every held one a
``flow_waiters`` row, and each of their foreign keys had PostgreSQL look up and lock
(``FOR KEY SHARE``, a WAL record) the task run and run they name: 15 us a slot and
about half of a waiter's 32-41 us on a slow VM, paid for every task of a limited
fan-out. The foreign keys' other duty, taking the rows with their task run, is a
statement trigger on ``task_runs`` now: one delete of each table per statement that
deletes task runs, instead of two per task run.

What the lookups also prevented, a slot for a task run deleted meanwhile, the
admission's statement prevents itself: it inserts the slots of the attempts whose wait
it deleted (``TAKE_FLOW_SLOTS``), and the trigger deletes waits before slots, so one of
the two waits for the other on the wait's row. Engines hold waits only of runs they
hold locked, which a run's deletion waits for.
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

FOREIGN_KEYS = [
    ("fk_flow_slots_task_run_id_task_runs", "flow_slots", "task_run_id", "task_runs"),
    ("fk_flow_waiters_task_run_id_task_runs", "flow_waiters", "task_run_id", "task_runs"),
    ("fk_flow_waiters_run_id_runs", "flow_waiters", "run_id", "runs"),
]

# Waits first: an admission racing the deletion deletes the wait before it inserts the
# slot, so the slots' delete (a statement of its own, on a snapshot taken after the
# waits' delete waited for that admission) sees the slot it took.
DELETE_FLOW_ROWS = """
CREATE FUNCTION flow_rows_of_deleted_task_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM flow_waiters WHERE task_run_id IN (SELECT id FROM gone);
  DELETE FROM flow_slots WHERE task_run_id IN (SELECT id FROM gone);
  RETURN NULL;
END $$
"""
TRIGGER = (
    "CREATE TRIGGER flow_rows_of_deleted_task_runs AFTER DELETE ON task_runs "
    "REFERENCING OLD TABLE AS gone FOR EACH STATEMENT "
    "EXECUTE FUNCTION flow_rows_of_deleted_task_runs()"
)


def upgrade() -> None:
    for name, table, _, _ in FOREIGN_KEYS:
        op.drop_constraint(name, table, type_="foreignkey")
    op.execute(DELETE_FLOW_ROWS)
    op.execute(TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER flow_rows_of_deleted_task_runs ON task_runs")
    op.execute("DROP FUNCTION flow_rows_of_deleted_task_runs()")
    for name, table, column, referred in FOREIGN_KEYS:
        op.execute(f"DELETE FROM {table} AS f WHERE NOT EXISTS "
                   f"(SELECT FROM {referred} AS r WHERE r.id = f.{column})")
        op.create_foreign_key(name, table, referred, [column], ["id"], ondelete="CASCADE")
