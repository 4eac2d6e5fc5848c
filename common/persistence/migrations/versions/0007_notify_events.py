"""notify events in PostgreSQL, moved out of the outbox

Revision ID: 0007
Revises: 0006

Events for the notify runner used to be outbox rows for the Redis queue
``stellwerk.notify``; the rows still waiting there move into ``notify_events`` (issue 13).
Messages already published to that queue are not in the outbox: drain the queue with the
old notify runner before upgrading to lose none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notify_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("events", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notify_events")),
    )
    op.execute(
        "INSERT INTO notify_events (events, created_at) "
        "SELECT payload -> 'events', created_at FROM outbox "
        "WHERE queue = 'stellwerk.notify' ORDER BY id"
    )
    op.execute("DELETE FROM outbox WHERE queue = 'stellwerk.notify'")


def downgrade() -> None:
    op.execute(
        "INSERT INTO outbox (queue, task_name, task_id, payload, created_at) "
        "SELECT 'stellwerk.notify', 'stellwerk.notify', m.id::text, "
        "jsonb_build_object('message_id', m.id, 'events', n.events), n.created_at "
        "FROM notify_events AS n CROSS JOIN LATERAL (SELECT gen_random_uuid() AS id) AS m "
        "ORDER BY n.id"
    )
    op.drop_table("notify_events")
