"""The lists' bodies (``GET /jobs``, ``GET /runs``, a job's runs) written straight from rows.

The server built every value itself: validating them again as ``JobsPublic`` (or
``RunsPublic``) and dumping that, with each row first made a detached ``Job`` (``Run``)
and read back attribute by attribute, cost a page of 20 more CPU than PostgreSQL's
answer (bench/README.md, 2026-11-29). The rows are those models' shape: tests hold them
to it (each page written here is one that its model reads back unchanged, and shows of
each item what reading it alone shows).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson

from common.domain.spec import Schedule
from scheduler.services.pages import Page


def jobs_json(page: Page[dict[str, Any]]) -> bytes:
    """The page of ``LIST_JOBS`` rows as ``JobsPublic``'s JSON."""
    return page_json(Page([_listed(row) for row in page.items], page.next_cursor))


def page_json(page: Page[dict[str, Any]]) -> bytes:
    """A page of items already in their model's shape, as JSON.

    The runs' lists: their services shape them. Times in UTC are written with ``Z``, as
    pydantic writes them.
    """
    return orjson.dumps({"data": page.items, "next_cursor": page.next_cursor},
                        option=orjson.OPT_UTC_Z)


def _listed(row: dict[str, Any]) -> dict[str, Any]:
    """A ``LIST_JOBS`` row (with its ``state``) as ``JobSummaryPublic``."""
    latest_id = row["latest_id"]
    return {
        "id": row["id"], "name": row["name"], "description": row["description"],
        "application": row["application"], "type": row["type"], "tenant": row["tenant"],
        "owner": row["owner"], "labels": row["labels"], "priority": row["priority"],
        # Stored as the model dumped it; a key a later version added shows its default.
        "schedule": {**_schedule_defaults(), **row["schedule"]},
        "enabled": row["enabled"], "draft": row["draft"], "version": row["version"],
        "state": row["state"], "run_id": row["first_run_id"], "latest_run_id": latest_id,
        "latest_run": None if latest_id is None else {
            "id": latest_id, "number": row["latest_number"], "state": row["latest_state"],
            "started_at": row["latest_started_at"],
            "finished_at": row["latest_finished_at"]},
        "next_fire_at": row["next_fire_at"], "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


@cache
def _schedule_defaults() -> dict[str, Any]:
    return Schedule().model_dump(mode="json")
