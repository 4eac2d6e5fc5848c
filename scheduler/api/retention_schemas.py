"""Bodies of ``POST /prune``: ``PruneRequest`` in, ``PrunePublic`` out."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class PruneRequest(BaseModel):
    """What to delete: finished runs older than ``older_than_s``, beyond each job's last."""

    model_config = ConfigDict(extra="forbid")

    older_than_s: float = Field(
        ge=0, le=100 * 365 * 86400,
        description="Runs that finished longer ago than this many seconds go (0: all).",
    )
    keep_runs: int | None = Field(
        default=None, ge=0, le=1_000_000,
        description="Keep each job's last this many runs; omitted: "
        "`STELLWERK_RETENTION_KEEP_RUNS` of the API (10 by default).",
    )
    tenant: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Only this tenant's jobs; a tenant-bound token prunes its own only.",
    )


class PrunePublic(BaseModel):
    """What one call deleted; ``more`` means call again to delete the rest."""

    cutoff: datetime
    keep_runs: int
    tenant: str | None
    runs: int = Field(description="Runs deleted, with their task runs, logs and journal.")
    fires: int = Field(description="Past cron fires deleted.")
    more: bool = Field(description="Each call deletes a few batches; more are left.")
