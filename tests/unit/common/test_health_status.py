"""Health status files: what a component writes during an outage, what its check concludes."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from pathlib import Path

from common.health import (
    Status,
    StatusWriter,
    read_crash_loops,
    read_statuses,
    status_of,
    verdict,
    write_crash_loops,
)
from common.outage import Outage

log = logging.getLogger(__name__)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_process_whose_servers_answer_is_healthy() -> None:
    status = status_of("engine", [Outage("Redis", log), Outage("PostgreSQL", log)], now=5.0)
    assert status.healthy
    assert verdict("engine", [status], now=6.0) is None


def test_a_server_down_names_it_with_the_longest_outage_of_its_loops() -> None:
    clock = Clock()
    first, second, database = (Outage(name, log, monotonic=clock)
                               for name in ("Redis", "Redis", "PostgreSQL"))
    first.failed(ConnectionError("refused"))
    clock.now += 10
    second.failed(ConnectionError("refused"))
    clock.now += 2
    status = status_of("beat", [first, second, database], now=50.0)
    assert status.down == {"Redis": 12.0}
    reason = verdict("beat", [status], now=51.0)
    assert reason == f"the beat is unhealthy: pid {os.getpid()} cannot reach Redis (for 12 s)"


def test_an_outage_that_ended_leaves_the_process_healthy() -> None:
    outage = Outage("Redis", log)
    outage.failed(ConnectionError("refused"))
    outage.succeeded()
    assert status_of("worker", [outage]).healthy


def test_a_status_not_rewritten_for_long_says_the_process_hangs() -> None:
    stale = Status("engine", 4242, written_at=100.0)
    assert verdict("engine", [stale], now=110.0) is None
    reason = verdict("engine", [stale], now=120.0, stale_after=timedelta(seconds=15))
    assert reason == "the engine is unhealthy: pid 4242 has not written its status for 20 s"


def test_the_writer_keeps_a_file_the_check_reads_and_removes_it_at_stop(tmp_path: Path) -> None:
    outage = Outage("PostgreSQL", log)
    with StatusWriter(tmp_path, "notify", lambda: [outage], refresh=timedelta(hours=1)) as writer:
        [status] = read_statuses(tmp_path, "notify")
        assert (status.pid, status.healthy) == (os.getpid(), True)
        outage.failed(OSError("connection refused"))
        writer.write()
        [status] = read_statuses(tmp_path, "notify")
        assert list(status.down) == ["PostgreSQL"]
        assert read_statuses(tmp_path, "engine") == []
    assert list(tmp_path.iterdir()) == []


def test_files_of_processes_that_are_gone_are_ignored(tmp_path: Path) -> None:
    with StatusWriter(tmp_path, "engine", list, refresh=timedelta(hours=1)):
        mine = tmp_path / f"engine-{os.getpid()}.json"
        # The same pid, started at another time: a dead process whose pid was reused.
        (tmp_path / "engine-1.json").write_text(
            mine.read_text().replace(f'"pid": {os.getpid()}', '"pid": 1')
        )
        (tmp_path / "engine-999999999.json").write_text(
            mine.read_text().replace(f'"pid": {os.getpid()}', '"pid": 999999999')
        )
        (tmp_path / "engine-7.json").write_text("{half a file")
        assert [status.pid for status in read_statuses(tmp_path, "engine")] == [os.getpid()]


def test_the_supervisor_status_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.json"
    assert read_crash_loops(path) == {}
    write_crash_loops(path, {"engine": 3})
    assert read_crash_loops(path) == {"engine": 3}
    write_crash_loops(path, {})
    assert read_crash_loops(path) == {}
