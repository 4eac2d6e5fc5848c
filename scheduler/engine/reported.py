"""Results reported over HTTP: post-backs and web-service callbacks (docs/processors.md).

The API applies them itself, in one transaction, with the engine's own parts, as it
does a person's action (``commands``): the run is locked and loaded, the report
becomes a :class:`TaskResult` like a worker's, and the same code keeps its log and
storage, renews or detaches its lease and feeds it to ``advance``. So the caller gets
its answer in the same request: 204, or a 409 naming the task's state or its current
attempt, having changed nothing.

An outcome reported twice is recognised by an id derived from what it says (task run,
attempt, outcome, output, message), recorded in ``consumed_messages`` with the change
it caused, exactly as a redelivered engine message is: an identical repeat is answered
as the first was, also once the task has moved on. Ids are pruned after a day (the
beat's ``prune_consumed``); a repeat after that is a 409 like any late report.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from common.domain.snapshot import TaskRunView
from common.domain.webservice import ReportedState
from common.messaging.messages import LogLine, TaskResult
from common.persistence.db import driver
from scheduler.engine.applying import Applying, RunWriter
from scheduler.engine.batch import LIVE
from scheduler.engine.commands import task_name
from scheduler.engine.incoming import result_event
from scheduler.engine.loading import RunRecord
from scheduler.engine.writer import claim_messages
from scheduler.services.errors import Conflict, NotFound

log = logging.getLogger(__name__)
# Names the ids of reported outcomes (uuid5), apart from any other message id.
_REPORTS = uuid.UUID("0f6c1a52-8d0e-4b43-9a53-2c1f3d5e7a91")


@dataclass(frozen=True)
class Report:
    """What an outsider says about an attempt: an outcome, or a sign of life with logs."""

    kind: Literal["heartbeat", "finished"]
    attempt: int | None = None  # None: the task's current attempt
    outcome: ReportedState | None = None
    output: dict[str, Any] | None = None
    message: str = ""
    logs: list[LogLine] = field(default_factory=list)
    storage: dict[str, Any] | None = None

    def repeat_id(self, task_run_id: uuid.UUID, attempt: int) -> uuid.UUID | None:
        """The same id for the same outcome of the same attempt; None for a heartbeat."""
        if self.kind != "finished":
            return None
        said = [str(task_run_id), attempt, self.outcome, self.output, self.message]
        return uuid.uuid5(_REPORTS, json.dumps(said, sort_keys=True, separators=(",", ":")))

    def result(self, record: RunRecord, task: str, attempt: int, reporter: str) -> TaskResult:
        """The report as the result message a worker would have sent.

        A heartbeat is detached: whoever reports over HTTP holds no worker lease.
        """
        return TaskResult(
            task_run_id=record.task_run_ids[task], run_id=record.id, attempt=attempt,
            kind=self.kind, outcome=self.outcome, output=self.output, message=self.message,
            worker=reporter, logs=self.logs, storage=self.storage,
            detached=self.kind != "finished",
        )


class Reports(RunWriter):
    """Applies reports; composed once per API process (see ``Resources``)."""

    def apply(self, run_id: uuid.UUID, task: str, report: Report, reporter: str) -> None:
        """Apply ``report`` to the task (a name or task run id) of the run, or refuse it.

        :class:`NotFound` for an unknown run or task; :class:`Conflict` naming the state
        for a task that is not READY, ACTIVE (or PAUSED), or an attempt not current.
        """
        with self._sessions.begin() as session:
            conn = driver(session)
            record = self._loader.lock(conn, [run_id]).get(run_id)
            if record is None:
                raise NotFound("run", run_id)
            name = task_name(record, task)
            view = record.snapshot.tasks[name]
            attempt = view.attempt if report.attempt is None else report.attempt
            repeat = report.repeat_id(record.task_run_ids[name], attempt)
            if repeat is not None and not claim_messages(conn, [repeat]):
                log.info("run %s task %s attempt %d: repeated %s ignored", run_id, name,
                         attempt, report.outcome)
                return
            _require_current(name, view, attempt)
            applying = self.applying(reporter)
            self._record(record, name, report.result(record, name, attempt, reporter), applying)
            written = applying.write(conn, [record])
        log.info("run %s task %s attempt %d: %s %s reported by %s", run_id, name, attempt,
                 report.kind, report.outcome or "", reporter)
        self.after_commit(written)

    @staticmethod
    def _record(record: RunRecord, task: str, result: TaskResult, applying: Applying) -> None:
        """Keep the result and apply its event, as the engine's batch does."""
        state = record.snapshot.tasks[task].state
        attached = task not in record.detached
        applying.keep_result(record, task, result)
        event = result_event(result, task, state)
        if event is not None:
            applying.apply(record, event, result)
        if result.kind == "finished" and attached:
            # A worker may hold the attempt, or take it from its queue: it need not run.
            applying.stop(record, task, result.attempt)


def _require_current(task: str, view: TaskRunView, attempt: int) -> None:
    if attempt != view.attempt:
        raise Conflict(
            f"attempt {attempt} of task {task!r} is not current: the task is {view.state} "
            f"at attempt {view.attempt}"
        )
    if view.state not in LIVE:
        raise Conflict(
            f"task {task!r} is {view.state}: outcomes and callbacks are taken only while it "
            "is READY or ACTIVE (or PAUSED)"
        )
