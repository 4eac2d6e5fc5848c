"""job names: unique per tenant (issue 17)

Revision ID: 0012
Revises: 0011

Jobs are addressed by name as well as by id (``GET /jobs/first-job``, ``stellwerk
run-now first-job``, ``stellwerk apply``), so a name names one job of its tenant. Where
an installation already holds several jobs of one name in a tenant, the newest keeps
it and each older one gets its id appended (``nightly-3f2a9c1e-...``, whole: a part of
it could be the same for two): nothing is deleted, every job stays reachable by its id.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE jobs AS j SET name = left(j.name, 163) || '-' || j.id::text "
        "FROM (SELECT id, row_number() OVER (PARTITION BY tenant, name "
        "      ORDER BY created_at DESC, id DESC) AS n FROM jobs) AS d "
        "WHERE d.id = j.id AND d.n > 1"
    )
    op.create_index("uq_jobs_tenant_name", "jobs", ["tenant", "name"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_jobs_tenant_name", table_name="jobs")
