"""Crash loops: a component restarted again and again is named, not silently restarted."""

from __future__ import annotations

import logging
import queue
import sys
from datetime import timedelta

import pytest

from scheduler.cli.supervisor import Backoff, ChildSpec, CrashLoop, Supervisor

FAST = Backoff(initial=timedelta(milliseconds=20), maximum=timedelta(milliseconds=50))
POLL = timedelta(milliseconds=20)


def test_restarts_within_the_window_make_a_crash_loop() -> None:
    policy = CrashLoop(restarts=3, window=timedelta(seconds=60))
    assert not policy.looping([10.0, 20.0], now=30.0)
    assert policy.looping([10.0, 20.0, 30.0], now=30.0)
    assert policy.recent([10.0, 20.0, 30.0], now=30.0) == 3


def test_restarts_older_than_the_window_no_longer_count() -> None:
    policy = CrashLoop(restarts=3, window=timedelta(seconds=60))
    assert policy.looping([10.0, 20.0, 30.0], now=69.0)
    assert not policy.looping([10.0, 20.0, 30.0], now=71.0)
    assert policy.recent([10.0, 20.0, 30.0], now=85.0) == 1


def test_the_supervisor_names_a_crash_looping_child_and_reports_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.cli.supervisor")
    reports: queue.SimpleQueue[dict[str, int]] = queue.SimpleQueue()
    supervisor = Supervisor(
        [ChildSpec("steady", (sys.executable, "-c", "import time; time.sleep(60)")),
         ChildSpec("crashy", (sys.executable, "-c", "raise SystemExit(3)"))],
        lambda name, line: None, backoff=FAST, poll_interval=POLL,
        crash_loop=CrashLoop(restarts=3, window=timedelta(minutes=1)),
        on_crash_loops=reports.put,
    )
    supervisor.start()
    try:
        first = reports.get(timeout=20)
        assert first.keys() == {"crashy"}
        assert first["crashy"] >= 3
        assert supervisor.crash_looping().keys() == {"crashy"}
        assert supervisor.restarts("steady") == 0
    finally:
        supervisor.stop(timedelta(seconds=2))
    assert reports.empty()  # it stays crash-looping: not reported again
    assert caplog.text.count("crashy is crash-looping: restarted 3 times within 60 s") == 1
