"""The chaos suite's measure of an engine kill: when the messages it had taken were
applied, read from the record (``bench/chaos_db.py``)."""

from __future__ import annotations

import time
import uuid

import psycopg

from bench.chaos_db import Taken, applied_after


def consumed(database_url: str, seconds_ago: float) -> str:
    """A message id recorded as consumed ``seconds_ago``."""
    message_id = str(uuid.uuid4())
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO consumed_messages (message_id, at) "
                     "VALUES (%s, now() - make_interval(secs => %s))", (message_id, seconds_ago))
    return message_id


def started(message_id: str) -> Taken:
    """A worker's ``started`` report of a task no journal row will ever mention."""
    return Taken("stellwerk.result", "started", str(uuid.uuid4()), str(uuid.uuid4()), "t", 1,
                 message_id)


def test_a_taken_message_counts_from_its_batch_s_commit(database_url: str) -> None:
    """Its task's next change may be its end, seconds later: the commit is what counts."""
    kill = time.time() - 10
    at = applied_after(database_url, [started(consumed(database_url, 4))], kill)
    assert at is not None and abs(at - (kill + 6)) < 1


def test_one_applied_before_the_kill_counts_from_the_kill(database_url: str) -> None:
    kill = time.time() - 10
    taken = [started(consumed(database_url, 12)), started(consumed(database_url, 7))]
    at = applied_after(database_url, taken, kill)
    assert at is not None and abs(at - (kill + 3)) < 1


def test_one_not_applied_yet_has_no_recovery(database_url: str) -> None:
    kill = time.time() - 10
    taken = [started(consumed(database_url, 7)), started(str(uuid.uuid4()))]
    assert applied_after(database_url, taken, kill) is None
