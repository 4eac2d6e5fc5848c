"""A batch that completes runs of several jobs records each job's last success.

A batch of cron fires completes runs of many jobs; their next runs' ``LAST_SUCCESS_*``
come from what it records. Real PostgreSQL and Redis, the batch applier driven by hand.
"""

from __future__ import annotations

from sqlalchemy import select

from common.config import Settings
from common.messaging.messages import TaskResult
from common.persistence.models import JobStorage, Run
from scheduler.engine.incoming import Incoming

from .test_flow_gate import Engine


def test_runs_of_two_jobs_completed_in_one_batch_record_both_successes(
    quiet_settings: Settings,
) -> None:
    engine = Engine(quiet_settings)
    runs = [engine.submit({"name": f"nightly{i}", "tasks": [{"name": "t0", "type": "noop"}]})
            for i in range(2)]
    for run_id in runs:
        engine.start(run_id)
    results = []
    for run_id in runs:
        row = engine.task(run_id, "t0")
        results.append(TaskResult(task_run_id=row.id, run_id=run_id, attempt=row.attempt,
                                  kind="finished", outcome="COMPLETED"))
    engine.applier.apply([Incoming(r.message_id, r.run_id, r) for r in results])
    with engine.sessions() as session:
        done = session.execute(select(Run.job_id, Run.state, Run.started_at, Run.finished_at)
                               .where(Run.id.in_(runs))).all()
        assert [state for _, state, _, _ in done] == ["COMPLETED", "COMPLETED"]
        for job_id, _, started_at, finished_at in done:
            storage = session.get(JobStorage, job_id)
            assert storage is not None
            assert (storage.last_success_start, storage.last_success_finish) == (
                started_at, finished_at)
