"""The retention settings (issue 14): 30 days and 10 runs by default, 0 days is off."""

from __future__ import annotations

from datetime import timedelta

from common.config import load_settings
from common.persistence.db import make_engine, make_sessions
from scheduler.beat.main import chores
from scheduler.beat.retention import Retention


def test_the_beat_prunes_after_30_days_unless_told_0() -> None:
    sessions = make_sessions(make_engine("postgresql://unused@127.0.0.1:1/none"))
    default = load_settings()
    off = load_settings(retention_days=0)

    assert (default.retention, default.retention_keep_runs) == (timedelta(days=30), 10)
    assert [type(chore) for chore in chores(sessions, default)] == [Retention]
    assert off.retention is None
    assert chores(sessions, off) == []
