"""``tasks.flow`` as written by a create: the same column each task would build alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from common.domain.spec import JobSpec
from common.persistence.db import make_engine, make_sessions
from scheduler.engine.structure import load_structures
from scheduler.services.jobs import create_job, flow_column

SETTINGS: list[dict[str, Any]] = [
    {"concurrency": [{"key": "db-{task}", "limit": 3}],
     "rate": {"key": "gh", "limit": 5, "per": 60}},
    {"concurrency": [{"key": "db", "limit": 3}]},
    {},
]


@pytest.mark.parametrize("flow", SETTINGS)
def test_each_stored_column_is_the_tasks_own_and_loads_as_its_keys(
    database_url: str, flow: dict[str, Any],
) -> None:
    tasks: list[dict[str, Any]] = [{"name": "start", "type": "noop", "next": ["t0", "t1", "t2"]}]
    tasks += [{"name": f"t{i}", "type": "noop", **flow} for i in range(3)]
    spec = JobSpec.model_validate({"name": f"fan-{uuid.uuid4().hex[:8]}", "draft": True,
                                   "tasks": tasks})
    engine = make_engine(database_url)
    try:
        with make_sessions(engine).begin() as session:
            job_id = create_job(session, spec, datetime.now(UTC)).job_id
    finally:
        engine.dispose()
    with psycopg.connect(database_url) as conn:
        stored: dict[str, Any] = dict(
            conn.execute("SELECT name, flow FROM tasks WHERE job_id = %s", (job_id,)))
        [structure] = load_structures(conn, [job_id])
    assert stored == {task.name: flow_column(task, spec) for task in spec.tasks}
    for task in spec.tasks:
        assert structure.tasks[task.name].flow == spec.flow_needs(task)
