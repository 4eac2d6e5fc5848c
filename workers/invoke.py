"""Calling a processor: the SDK's promises about exceptions and ``None``.

A processor that raises has failed with the exception's text (its traceback goes to
the task log, where the person debugging it looks first); one that returns ``None``
has completed with no output. Anything else that is not an outcome is a bug in the
processor, reported as a failure that says so rather than crashing the worker.
"""

from __future__ import annotations

import traceback

from workers.context import TaskContext
from workers.outcomes import Accepted, Completed, Failed, Outcome, Rejected
from workers.registry import Processor


def invoke(fn: Processor, ctx: TaskContext) -> Outcome:
    """Run ``fn`` on ``ctx`` and return its outcome, whatever it does."""
    try:
        result = fn(ctx)
    except Exception as exc:  # any exception is the task's failure, not the worker's
        for line in traceback.format_exc().splitlines():
            ctx.log(line)
        return Failed(f"{type(exc).__name__}: {exc}")
    if result is None:
        return Completed()
    if isinstance(result, Completed | Failed | Rejected | Accepted):
        return result
    return Failed(f"processor returned {type(result).__name__}, not an outcome")
