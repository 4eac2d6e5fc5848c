"""The engine's periodic log line counts the batches applied ahead of their lock."""

from __future__ import annotations

import logging

import pytest

from scheduler.engine.consumer import STATS_EVERY_S, BatchStats


def test_the_stats_line_counts_batches_applied_ahead(caplog: pytest.LogCaptureFixture) -> None:
    stats = BatchStats()
    with caplog.at_level(logging.INFO, logger="scheduler.engine.consumer"):
        stats.add(25, 0.015, ahead=True)
        stats.add(1, 0.004)
        stats._since -= STATS_EVERY_S  # the period is over with the next batch
        stats.add(24, 0.016, ahead=True)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert line.startswith("applied 50 messages in 3 batches")
    assert line.endswith("2 ahead of their lock)")
    assert (stats.batches, stats.ahead) == (0, 0)  # counted afresh from there
