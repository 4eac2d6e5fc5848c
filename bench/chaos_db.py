"""What the chaos suite reads from PostgreSQL: the record of every state change.

Each read opens its own short connection: the suite reads while faults take the server
away, and a read that fails (``None``) is simply tried again later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

CONNECT_TIMEOUT_S = 3

Attempt = tuple[str, str, int]  # run id, task name, attempt


def query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
    """The rows of one statement, or None when the server cannot be reached."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
            return list(conn.execute(sql, params).fetchall())
    except psycopg.Error:
        return None


def epoch(moment: datetime | None) -> float | None:
    """A database timestamp as Unix seconds."""
    return None if moment is None else moment.timestamp()


def active_attempts(url: str, worker_pid: int) -> list[Attempt]:
    """The ACTIVE attempts held by the worker process ``worker_pid`` (its default name)."""
    rows = query(url, "SELECT run_id::text, name, attempt FROM task_runs "
                      "WHERE state = 'ACTIVE' AND worker LIKE %s", (f"worker-{worker_pid}@%",))
    return [(r[0], r[1], r[2]) for r in rows or []]


def first_change_after(url: str, moment: float) -> float | None:
    """When the first task state change a worker reported was recorded after ``moment``.

    Only those prove the whole path works again (dispatch through Redis, a worker, its
    report back, the engine's commit): the API creates runs without Redis.
    """
    rows = query(url, "SELECT min(at) FROM journal WHERE at > to_timestamp(%s) AND task IS "
                      "NOT NULL AND to_state IN ('ACTIVE', 'COMPLETED', 'SOFT_FAILED', "
                      "'FAILED')", (moment,))
    return epoch(rows[0][0]) if rows else None


def changes_between(url: str, start: float, end: float) -> int | None:
    """How many state changes were recorded between two moments."""
    rows = query(url, "SELECT count(*) FROM journal WHERE at > to_timestamp(%s) "
                      "AND at <= to_timestamp(%s)", (start, end))
    return int(rows[0][0]) if rows else None


@dataclass(frozen=True)
class NextChange:
    """The first state change of a held attempt's task after a fault."""

    attempt: Attempt
    at: float | None
    change: str  # "ACTIVE -> READY (lease expired: worker lost)"


def next_changes(url: str, held: Sequence[Attempt], moment: float) -> list[NextChange] | None:
    """For each of ``held``, its task's first state change after ``moment``."""
    rows = query(
        url,
        "SELECT DISTINCT ON (h.run_id, h.task) h.run_id::text, h.task, j.at, j.from_state, "
        "j.to_state, j.reason FROM unnest(%s::uuid[], %s::text[]) AS h(run_id, task) "
        "LEFT JOIN journal j ON j.run_id = h.run_id AND j.task = h.task "
        "AND j.at > to_timestamp(%s) ORDER BY h.run_id, h.task, j.at",
        ([a[0] for a in held], [a[1] for a in held], moment),
    )
    if rows is None:
        return None
    attempts = {(a[0], a[1]): a for a in held}
    return [NextChange(attempts[(r[0], r[1])], epoch(r[2]),
                       f"{r[3]} -> {r[4]} ({r[5]})" if r[2] is not None else "none yet")
            for r in rows]


def requeued_after(url: str, held: Sequence[Attempt], moment: float) -> float | None:
    """When the last of ``held`` moved on (its task's next state change after
    ``moment``); None while one has not."""
    changes = next_changes(url, held, moment) if held else None
    if not changes or any(c.at is None for c in changes):
        return None
    return max(c.at for c in changes if c.at is not None)


@dataclass(frozen=True)
class Taken:
    """A message an engine had taken when it was killed: what it is about."""

    message: str  # stellwerk.result, stellwerk.activate
    kind: str  # started, finished; start, lease_expired, ...
    run_id: str
    task_run_id: str | None
    task: str | None
    attempt: int | None
    message_id: str = ""

    def describe(self) -> str:
        """One line for the evidence."""
        about = self.task or self.task_run_id or "the run"
        return f"{self.message} {self.kind} run {self.run_id} {about} attempt {self.attempt}"


def applied_after(url: str, taken: Sequence[Taken], moment: float) -> float | None:
    """When the last of ``taken`` was applied after ``moment``: its batch committed (its
    id in ``consumed_messages``), or, for a message without an id, its task's (or run's)
    first state change after it.

    A message whose batch the engine committed before it was killed (taken, applied,
    not yet acknowledged) was applied by ``moment``: its effects are recorded already,
    and its second delivery changes nothing, so there is no later change to wait for.
    The commit, not the next state change, is the measure: a ``started`` report's
    change is dated by the worker (before the kill), so the next one was its task's
    end, seconds later for a task queued in a lane (7.2 s once against a 5 s target).
    """
    last = 0.0
    for message in taken:
        consumed = _consumed_at(url, message.message_id)
        if consumed is not None:  # one committed before the kill counts from the kill
            last = max(last, consumed, moment)
            continue
        if message.task_run_id or message.task:
            rows = query(url, "SELECT min(j.at) FROM journal j JOIN task_runs t ON "
                              "t.run_id = j.run_id AND t.name = j.task WHERE j.run_id = %s "
                              "AND (t.id::text = %s OR t.name = %s) AND j.at > to_timestamp(%s)",
                         (message.run_id, message.task_run_id, message.task, moment))
        else:
            rows = query(url, "SELECT min(at) FROM journal WHERE run_id = %s AND task IS NULL "
                              "AND at > to_timestamp(%s)", (message.run_id, moment))
        at = epoch(rows[0][0]) if rows else None
        if at is None:
            return None
        last = max(last, at)
    return last


def _consumed_at(url: str, message_id: str) -> float | None:
    """When the message's batch committed (its id consumed), if it has."""
    if not message_id:
        return None
    rows = query(url, "SELECT at FROM consumed_messages WHERE message_id::text = %s",
                 (message_id,))
    return epoch(rows[0][0]) if rows else None


def run_finished_at(url: str, job_id: str) -> float | None:
    """When the (single) run of a job ended; None while it runs."""
    rows = query(url, "SELECT finished_at FROM runs WHERE job_id = %s AND state IN "
                      "('COMPLETED', 'FAILED', 'TIMEOUT', 'CANCELED')", (job_id,))
    return epoch(rows[0][0]) if rows else None


def unfinished_runs(url: str) -> int | None:
    """How many runs are not terminal."""
    rows = query(url, "SELECT count(*) FROM runs WHERE state NOT IN "
                      "('COMPLETED', 'FAILED', 'TIMEOUT', 'CANCELED')")
    return int(rows[0][0]) if rows else None


@dataclass(frozen=True)
class Record:
    """Everything the checks read, taken once after quiescence."""

    runs: list[tuple[Any, ...]]  # id, job id, job name, state, scheduled_for
    task_runs: list[tuple[Any, ...]]  # run id, name, state, attempt, worker
    journal: list[tuple[Any, ...]]  # run id, task, attempt, at, from, to, reason
    # Flow control's rows left at quiescence: slots held, attempts waiting (issue 16).
    flow_left: tuple[int, int] = (0, 0)


def read_record(url: str) -> Record:
    """The runs, task runs, journal and flow rows; raises when the database cannot be read."""
    runs = query(url, "SELECT r.id::text, r.job_id::text, j.name, r.state, r.scheduled_for "
                      "FROM runs r JOIN jobs j ON j.id = r.job_id")
    task_runs = query(url, "SELECT run_id::text, name, state, attempt, worker FROM task_runs")
    journal = query(url, "SELECT run_id::text, task, attempt, at, from_state, to_state, reason "
                         "FROM journal ORDER BY id")
    flow = query(url, "SELECT (SELECT count(*) FROM flow_slots), "
                      "(SELECT count(*) FROM flow_waiters)")
    if runs is None or task_runs is None or journal is None or not flow:
        raise RuntimeError("the database cannot be read after quiescence")
    return Record(runs, task_runs, journal, (int(flow[0][0]), int(flow[0][1])))
