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
                    concurrency: int = 8, *, engines: int = 1, workers: int = 1) -> None:
    """Beat, ``engines`` engines and ``workers`` workers of ``noop`` tasks (threads x
    ``concurrency``), named ``engine``, ``engine-2``, ..., ``worker``, ``worker-2``, ..."""
    env = {**os.environ, "STELLWERK_DATABASE_URL": database_url,
           "STELLWERK_REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1"}
    cli = [sys.executable, "-m", "scheduler.cli.main"]
    for number in range(1, engines + 1):
        procs.start(numbered("engine", number), [*cli, "engine"], env)
    procs.start("beat", [*cli, "beat"], env)
    for number in range(1, workers + 1):
        procs.start(numbered("worker", number), [
            *cli, "worker", "--types", "noop", "--concurrency", str(concurrency),
            "--pool", "threads"], env)


def numbered(component: str, number: int) -> str:
    """The first of a component is plain ``engine``, the next ``engine-2``: one-process
    runs keep the names their reports always had."""
    return component if number == 1 else f"{component}-{number}"


def by_component(cpu_s: dict[str, float]) -> dict[str, float]:
    """Per-process figures summed per component (``engine`` and ``engine-2``: ``engine``)."""
    out: dict[str, float] = {}
    for name, value in cpu_s.items():
        component = name.split("-")[0]
        out[component] = out.get(component, 0.0) + value
    return out
