"""``shell`` (``argv``, ``env``, ``cwd``): one process, run from an argv list.

Never through a shell string: ``argv[0]`` is executed with ``argv[1:]`` as its
arguments, so nothing in a job's params is ever parsed by ``/bin/sh``. The process gets
the environment contract of docs/job-spec.md (``JOB_ID``, ``JOB_PARAMS``, ...);
its stdout and stderr lines become the task log, and a stdout line
``[saveJobStorage] {json}`` saves the job storage for the next run. It runs in its own
process group, so a cancel or timeout stops whatever it started as well, and on Linux
it dies with the worker (``PR_SET_PDEATHSIG``): a worker killed with SIGKILL leaves no
process running on, whose attempt the beat requeues while it still writes its effects.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO

from pydantic import ValidationError

from common.domain.builtin_params import ShellParams, describe
from workers.builtin.outputline import record_output_line
from workers.builtin.shellenv import shell_environment
from workers.context import TaskContext
from workers.outcomes import Completed, Failed
from workers.registry import processor
from workers.tasklog import LogStream

PR_SET_PDEATHSIG = 1  # linux/prctl.h
TERM_GRACE_S = 5.0
# How often a running process's task is checked for a cancel request.
CANCEL_POLL_S = 0.1
# After the process exits, how long its output may take to drain (a child it left
# behind may still hold the pipes).
DRAIN_S = 2.0
# A longer line is read in pieces; it bounds the memory a line without newline takes.
MAX_READ_BYTES = 1024 * 1024


@processor("shell")
def shell(ctx: TaskContext) -> Completed | Failed:
    """Run ``argv`` to its end (or until cancelled); exit code 0 is success."""
    try:
        params = ShellParams.model_validate(ctx.params)
    except ValidationError as exc:
        return Failed("invalid shell params: " + describe(exc))
    try:
        proc = subprocess.Popen(  # noqa: S603 - an argv list from the job, by design
            params.argv,
            shell=False,
            env=shell_environment(ctx, params.env),
            cwd=params.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, no locks taken
        )
    except OSError as exc:
        return Failed(f"cannot start {params.argv[0]!r}: {exc}")
    readers = [_read_lines(ctx, proc.stdout, "stdout"), _read_lines(ctx, proc.stderr, "stderr")]
    code = _wait(ctx, proc)
    _drain(ctx, proc, readers)
    output = {"exit_code": code}
    if ctx.cancelled:
        return Failed(f"canceled: exit code {code}", output)
    if code == 0:
        return Completed(output)
    return Failed(f"exit code {code}", output)


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child SIGKILLed when its parent dies (Linux only).

    The signal is tied to the thread that forked; the worker's pool threads live as
    long as the worker. A parent that died before ``prctl`` took effect is seen as a
    changed parent pid, and the child ends itself at once.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _read_lines(ctx: TaskContext, pipe: IO[bytes] | None, stream: LogStream) -> threading.Thread:
    def read() -> None:
        assert pipe is not None
        with pipe:
            for raw in iter(lambda: pipe.readline(MAX_READ_BYTES), b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                record_output_line(ctx, line, stream)

    thread = threading.Thread(target=read, name=f"{stream} {ctx.idempotency_key}", daemon=True)
    thread.start()
    return thread


def _wait(ctx: TaskContext, proc: subprocess.Popen[bytes]) -> int:
    """The exit code; on cancel, after stopping the process group."""
    while True:
        try:
            return proc.wait(timeout=CANCEL_POLL_S)
        except subprocess.TimeoutExpired:
            if ctx.cancelled:
                return _terminate(ctx, proc)


def _terminate(ctx: TaskContext, proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the process group, SIGKILL if it is still there after a grace period."""
    ctx.log(f"[stellwerk] stopping process group {proc.pid} (SIGTERM)")
    _signal_group(proc, signal.SIGTERM)
    try:
        return proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        ctx.log(f"[stellwerk] still running after {TERM_GRACE_S:g} s: SIGKILL")
        _signal_group(proc, signal.SIGKILL)
        return proc.wait()


def _drain(
    ctx: TaskContext, proc: subprocess.Popen[bytes], readers: list[threading.Thread]
) -> None:
    """Read the output to its end; kill what the process left behind holding it open."""
    for reader in readers:
        reader.join(DRAIN_S)
    if any(reader.is_alive() for reader in readers):
        ctx.log("[stellwerk] the process exited but its output is still open: killing its group")
        _signal_group(proc, signal.SIGKILL)
        for reader in readers:
            reader.join(DRAIN_S)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
