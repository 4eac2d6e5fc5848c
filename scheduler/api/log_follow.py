"""Following a task's log (``?follow=true``): lines as they are stored, until it is done.

The stream is plain text, one line per log line, and ends once the task has finished
(a terminal state, or CONFIRM) and every line is out. It polls PostgreSQL, where the
engine stores the lines workers report, every ``POLL`` — a follower holds a database
connection only for each short read, never while it waits, and it does not take one of
the API's admission slots (``scheduler.api.admission``): a few people following logs
must never keep other requests out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from uuid import UUID

import anyio
from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.states import TASK_TERMINAL, TaskState
from common.persistence.models import TaskLog, TaskRun

POLL = timedelta(milliseconds=500)
_DONE = {state.value for state in TASK_TERMINAL} | {TaskState.CONFIRM.value}


def follow_lines(
    sessions: Callable[[], Session], task_run_id: UUID, attempt: int | None,
    poll: timedelta = POLL,
) -> AsyncIterator[str]:
    """The task's log from its first line on, then each new line, until it is done."""

    def read(after: int) -> tuple[list[TaskLog], bool]:
        with sessions() as session:
            done = session.scalar(select(TaskRun.state).where(TaskRun.id == task_run_id))
            query = select(TaskLog).where(TaskLog.task_run_id == task_run_id, TaskLog.id > after)
            if attempt is not None:
                query = query.where(TaskLog.attempt == attempt)
            rows = list(session.scalars(query.order_by(TaskLog.id)))
        return rows, done is None or done in _DONE

    async def lines() -> AsyncIterator[str]:
        after = 0
        while True:
            rows, done = await anyio.to_thread.run_sync(read, after)
            if rows:
                after = rows[-1].id
                yield "".join(f"{row.line}\n" for row in rows)
            if done:  # the state was read before the lines: none can be missing
                return
            await anyio.sleep(poll.total_seconds())

    return lines()
