"""``sleep`` (``seconds``): waits, and stops at once when cancelled."""

from __future__ import annotations

from workers.context import TaskContext
from workers.outcomes import Completed, Failed
from workers.registry import processor


@processor("sleep")
def sleep(ctx: TaskContext) -> Completed | Failed:
    """Wait ``seconds`` on the cancel flag, so a cancel or timeout ends the wait."""
    seconds = ctx.params.get("seconds", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return Failed(f"params.seconds must be a number >= 0, not {seconds!r}")
    if ctx.wait_cancelled(float(seconds)):
        return Failed(f"canceled before {seconds:g} s had passed")
    return Completed({"slept_s": seconds})
