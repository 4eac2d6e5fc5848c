"""Child processes for the benchmarks, stopped together on exit."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType


class Processes:
    """Starts named child processes with their output in a temporary directory."""

    def __init__(self) -> None:
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = Path(tempfile.mkdtemp(prefix="stellwerk-bench-logs-"))

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        out = (self.logs / f"{name}.log").open("ab")
        self._procs[name] = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def cpu_seconds(self) -> dict[str, float]:
        """User+system CPU each live child, with its live children, has used so far."""
        import psutil

        out = {}
        for name, proc in self._procs.items():
            parent = psutil.Process(proc.pid)
            tree = [parent, *parent.children(recursive=True)]  # `api --workers N`'s
            out[name] = sum(p.cpu_times().user + p.cpu_times().system for p in tree)
        return out

    def stop(self, name: str) -> None:
        proc = self._procs.pop(name)
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for name in list(self._procs):
            self.stop(name)
        if kind is not None:
            print(f"process logs in {self.logs}")  # noqa: T201


def start_stellwerk(procs: Processes, database_url: str, redis_url: str,
                    concurrency: int = 8) -> None:
    """Engine, beat and one worker of ``noop`` tasks (threads x ``concurrency``)."""
    env = {**os.environ, "STELLWERK_DATABASE_URL": database_url,
           "STELLWERK_REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1"}
    cli = [sys.executable, "-m", "scheduler.cli.main"]
    procs.start("engine", [*cli, "engine"], env)
    procs.start("beat", [*cli, "beat"], env)
    procs.start("worker", [*cli, "worker", "--types", "noop", "--concurrency",
                           str(concurrency), "--pool", "threads"], env)
