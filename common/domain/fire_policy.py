"""What becomes of a cron fire: late fires (``catchup``) and busy jobs (``overlap``).

Pure decisions; the beat's cron duty loads the facts, asks here and writes the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Catchup = Literal["none", "latest", "all"]
Overlap = Literal["allow", "skip", "buffer_one", "cancel_previous"]
FireTrigger = Literal["schedule", "catchup"]

# A fire the beat reaches more than this after its time was missed (the beat was down,
# or STELLWERK_DISABLE_CRON was set): ``catchup`` decides. Less late is merely late.
MISSED_AFTER = timedelta(seconds=60)
# ``catchup: all`` without a ``catchup_window`` runs the missed fires of the last day.
DEFAULT_CATCHUP_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class Catch:
    """A fire to run (``trigger``) or to skip (``reason``)."""

    fire_at: datetime
    trigger: FireTrigger | None
    reason: str = ""


def catch_up(
    fires: Sequence[datetime], following: datetime, now: datetime, catchup: Catchup,
    *, window: timedelta | None = None, missed_after: timedelta = MISSED_AFTER,
) -> list[Catch]:
    """Decide each due fire (ascending); ``following`` is the fire after the last one.

    ``none`` skips missed fires; ``latest`` runs only the last missed fire (one run for
    all), ``all`` runs every missed fire inside the window. Fires not missed run.
    """
    def missed(fire: datetime) -> bool:
        return now - fire > missed_after

    decisions = []
    for index, fire in enumerate(fires):
        after = fires[index + 1] if index + 1 < len(fires) else following
        if not missed(fire):
            decisions.append(Catch(fire, "schedule"))
        elif catchup == "latest" and not missed(after):
            decisions.append(Catch(fire, "catchup"))
        elif catchup == "latest":
            decisions.append(Catch(fire, None, "missed; a later missed fire runs instead"))
        elif catchup == "all" and now - fire <= (window or DEFAULT_CATCHUP_WINDOW):
            decisions.append(Catch(fire, "catchup"))
        elif catchup == "all":
            decisions.append(Catch(fire, None, "missed, outside the catchup window"))
        else:
            decisions.append(Catch(fire, None, "missed (catchup: none)"))
    return decisions


@dataclass(frozen=True)
class OverlapPlan:
    """What to do with a fire that should run, given the job's unfinished runs.

    ``action``: ``run`` now, ``skip`` it, or ``buffer`` it until no run of the job is
    unfinished. ``cancel_unfinished``: cancel the job's unfinished runs first.
    ``drop_buffered``: the fire waiting so far is skipped (superseded by this one).
    """

    action: Literal["run", "skip", "buffer"]
    reason: str = ""
    cancel_unfinished: bool = False
    drop_buffered: bool = False


def plan_overlap(overlap: Overlap, unfinished: bool, buffered: bool) -> OverlapPlan:
    """Apply the job's ``overlap`` setting to a fire that is due to run.

    A waiting (buffered) fire counts as unfinished work: a later fire never overtakes
    it. ``cancel_previous`` buffers the new fire until the canceled runs have finished,
    so two runs of the job never run side by side.
    """
    busy = unfinished or buffered
    if overlap == "allow" or not busy:
        return OverlapPlan("run")
    if overlap == "skip":
        return OverlapPlan("skip", "overlap: the previous run is unfinished")
    if overlap == "buffer_one":
        if buffered:
            return OverlapPlan("skip", "overlap: a fire is already waiting (buffer_one)")
        return OverlapPlan("buffer")
    return OverlapPlan("buffer", cancel_unfinished=unfinished, drop_buffered=buffered)
