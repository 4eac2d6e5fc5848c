"""One line of a task process's output: into the task log, and maybe the job storage.

Shared by the processors that run a program (``shell``, ``kubernetes``): a stdout line
``[saveJobStorage] {json}`` saves the job storage for the next run (docs/job-spec.md), and every
line, that one included, goes to the task log as it came.
"""

from __future__ import annotations

import json

from workers.context import TaskContext
from workers.tasklog import LogStream

SAVE_STORAGE_PREFIX = "[saveJobStorage]"


def record_output_line(ctx: TaskContext, line: str, stream: LogStream) -> None:
    """Log ``line``; a stdout line starting with the storage prefix also saves storage."""
    if stream == "stdout" and line.startswith(SAVE_STORAGE_PREFIX):
        _save_storage(ctx, line[len(SAVE_STORAGE_PREFIX) :])
    ctx.log(line, stream)


def _save_storage(ctx: TaskContext, text: str) -> None:
    try:
        value = json.loads(text)
    except ValueError as exc:
        ctx.log(f"[stellwerk] {SAVE_STORAGE_PREFIX} ignored, not JSON: {exc}")
        return
    if not isinstance(value, dict):
        ctx.log(f"[stellwerk] {SAVE_STORAGE_PREFIX} ignored, not a JSON object")
        return
    ctx.save_storage(value)
