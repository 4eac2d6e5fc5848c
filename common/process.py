"""What every long-running Stellwerk process does once it is composed."""

from __future__ import annotations

import gc

# Young objects are collected after this many allocations instead of 700: a batch
# allocates tens of thousands, most of them freed by reference counting anyway.
GC_THRESHOLD = (50_000, 20, 100)


def settle_garbage_collector() -> None:
    """Keep the collector's full passes short in a long-running loop.

    A full collection walks every tracked object; with the libraries' import-time
    objects that took 80-150 ms in the engine, a stall in the middle of a busy cron
    second (measured). Everything alive once the process is composed lives as long as
    the process, so it is frozen out of the collector's walks.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
