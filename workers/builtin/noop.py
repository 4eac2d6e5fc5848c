"""``noop``: completes at once; for tests, benchmarks and joins that only wait."""

from __future__ import annotations

from workers.context import TaskContext
from workers.outcomes import Completed
from workers.registry import processor


@processor("noop")
def noop(ctx: TaskContext) -> Completed:
    """Do nothing, successfully."""
    return Completed()
