"""The supervisor with real child processes: restart on death, output, orderly stop."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from io import StringIO

import psutil
import pytest
from rich.console import Console

from scheduler.cli.output import PrefixedOutput
from scheduler.cli.supervisor import Backoff, ChildSpec, Supervisor, describe_exit, popen_child

FAST = Backoff(initial=timedelta(milliseconds=50), maximum=timedelta(milliseconds=200))
POLL = timedelta(milliseconds=20)
SLEEPER = "import time; print('ready', flush=True); time.sleep(60)"
DEAF = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(f'ready {child.pid}', flush=True)\n"
    "time.sleep(60)\n"
)


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


class Lines:
    """A line sink that tests can wait on."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.lines: list[tuple[str, str]] = []

    def __call__(self, name: str, line: str) -> None:
        with self._changed:
            self.lines.append((name, line))
            self._changed.notify_all()

    def of(self, name: str) -> list[str]:
        with self._changed:
            return [line for n, line in self.lines if n == name]

    def wait_for(self, name: str, prefix: str, count: int = 1, timeout_s: float = 15.0) -> str:
        def seen() -> list[str]:
            return [line for n, line in self.lines if n == name and line.startswith(prefix)]

        with self._changed:
            if not self._changed.wait_for(lambda: len(seen()) >= count, timeout_s):
                pytest.fail(f"{name} did not print {prefix!r} {count}x: {self.lines}")
            return seen()[-1]


class Recorder:
    """Starts children the normal way and remembers every process it started."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def __call__(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        process = popen_child(spec)
        self.started.append(process)
        return process


@pytest.fixture
def stack() -> Iterator[Callable[..., tuple[Supervisor, Lines, Recorder]]]:
    """Builds supervisors and makes sure each is stopped at the end of the test."""
    made: list[Supervisor] = []

    def build(*specs: ChildSpec) -> tuple[Supervisor, Lines, Recorder]:
        lines, recorder = Lines(), Recorder()
        supervisor = Supervisor(specs, lines, start=recorder, backoff=FAST, poll_interval=POLL)
        made.append(supervisor)
        return supervisor, lines, recorder

    yield build
    for supervisor in made:
        supervisor.stop(timedelta(seconds=2))


def test_a_child_that_dies_is_restarted_and_the_others_are_left_alone(
    stack: Callable[..., tuple[Supervisor, Lines, Recorder]],
    wait_until: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.cli.supervisor")
    supervisor, lines, _ = stack(
        ChildSpec("steady", python(SLEEPER)),
        ChildSpec("crashy", python("print('boom', flush=True); raise SystemExit(3)")),
    )
    supervisor.start()
    lines.wait_for("steady", "ready")
    steady_pid = supervisor.pid("steady")

    wait_until(lambda: supervisor.restarts("crashy") >= 2, "crashy to be restarted twice")
    lines.wait_for("crashy", "boom", count=2)

    assert supervisor.restarts("steady") == 0
    assert supervisor.pid("steady") == steady_pid
    assert "crashy exited with code 3; restarting in" in caplog.text


def test_a_child_counts_as_settled_only_once_it_has_stayed_up(
    stack: Callable[..., tuple[Supervisor, Lines, Recorder]],
    wait_until: Callable[..., None],
) -> None:
    supervisor, lines, _ = stack(
        ChildSpec("steady", python(SLEEPER)),
        ChildSpec("crashy", python("raise SystemExit(3)")),
    )
    supervisor.start()
    lines.wait_for("steady", "ready")
    wait_until(lambda: supervisor.restarts("crashy") >= 2, "crashy to be restarted twice")

    assert supervisor.unsettled(timedelta(0)).keys() <= {"crashy"}
    assert supervisor.unsettled(timedelta(hours=1)).keys() == {"steady", "crashy"}
    assert supervisor.unsettled(timedelta(hours=1))["crashy"] >= 2
    assert supervisor.unsettled(timedelta(hours=1))["steady"] == 0


def test_stop_terminates_every_child(
    stack: Callable[..., tuple[Supervisor, Lines, Recorder]],
) -> None:
    supervisor, lines, recorder = stack(
        ChildSpec("one", python(SLEEPER)), ChildSpec("two", python(SLEEPER))
    )
    supervisor.start()
    lines.wait_for("one", "ready")
    lines.wait_for("two", "ready")

    supervisor.stop(timedelta(seconds=5))

    assert [p.returncode for p in recorder.started] == [-signal.SIGTERM, -signal.SIGTERM]
    assert supervisor.restarts("one") == supervisor.restarts("two") == 0


def test_a_child_ignoring_sigterm_is_killed_with_its_process_group(
    stack: Callable[..., tuple[Supervisor, Lines, Recorder]],
    wait_until: Callable[..., None],
) -> None:
    supervisor, lines, recorder = stack(ChildSpec("deaf", python(DEAF)))
    supervisor.start()
    grandchild = int(lines.wait_for("deaf", "ready").split()[1])

    supervisor.stop(timedelta(milliseconds=300))

    assert recorder.started[0].returncode == -signal.SIGKILL
    wait_until(lambda: _gone(grandchild), "the grandchild to be killed")


def test_a_child_that_cannot_start_is_retried_without_stopping_the_others(
    stack: Callable[..., tuple[Supervisor, Lines, Recorder]],
    wait_until: Callable[..., None],
) -> None:
    supervisor, lines, _ = stack(
        ChildSpec("missing", ("/nonexistent/stellwerk-component",)),
        ChildSpec("steady", python(SLEEPER)),
    )
    supervisor.start()
    wait_until(lambda: supervisor.restarts("missing") >= 2, "retries of the missing program")
    lines.wait_for("steady", "ready")
    assert supervisor.pid("missing") is None


def test_children_get_their_environment(
    stack: Callable[..., tuple[Supervisor, Lines, Recorder]],
) -> None:
    code = "import os; print('url', os.environ['STELLWERK_REDIS_URL'], flush=True)"
    supervisor, lines, _ = stack(
        ChildSpec("env", python(code), {"STELLWERK_REDIS_URL": "redis://x:1/0"})
    )
    supervisor.start()
    assert lines.wait_for("env", "url") == "url redis://x:1/0"


def test_backoff_doubles_while_a_child_keeps_crashing_and_resets_once_it_ran_long() -> None:
    backoff = Backoff(
        initial=timedelta(seconds=1),
        maximum=timedelta(seconds=5),
        stable_after=timedelta(seconds=60),
    )
    quick = timedelta(seconds=2)
    delays = [backoff.next_delay(None, quick)]
    for _ in range(4):
        delays.append(backoff.next_delay(delays[-1], quick))
    assert [d.total_seconds() for d in delays] == [1, 2, 4, 5, 5]
    assert backoff.next_delay(timedelta(seconds=5), timedelta(days=1)) == timedelta(seconds=1)


def test_exit_descriptions() -> None:
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"


def test_prefixed_output_aligns_names_and_keeps_brackets_literal() -> None:
    buffer = StringIO()
    output = PrefixedOutput(Console(file=buffer, width=120, color_system=None), ["api", "worker"])
    output("api", "GET /healthz [200]")
    output("worker", "ready")
    assert buffer.getvalue().splitlines() == ["api    | GET /healthz [200]", "worker | ready"]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
