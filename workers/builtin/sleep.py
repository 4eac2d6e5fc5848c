"""``sleep`` (``seconds``): waits, and stops at once when cancelled."""

from __future__ import annotations

from pydantic import ValidationError

from common.domain.builtin_params import SleepParams, describe
from workers.context import TaskContext
from workers.outcomes import Completed, Failed
from workers.registry import processor


@processor("sleep")
def sleep(ctx: TaskContext) -> Completed | Failed:
    """Wait ``seconds`` on the cancel flag, so a cancel or timeout ends the wait."""
    try:
        seconds = SleepParams.model_validate(ctx.params).seconds
    except ValidationError as error:  # a job stored before params were checked at submit
        return Failed(describe(error))
    if ctx.wait_cancelled(seconds):
        return Failed(f"canceled before {seconds:g} s had passed")
    return Completed({"slept_s": ctx.params.get("seconds", 0)})
