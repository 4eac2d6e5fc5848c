"""The outage tracker: one log line when it starts, one when it ends, capped backoff."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from common.outage import Outage


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    outage = Outage("Redis", logging.getLogger("t"), monotonic=clock)
    with caplog.at_level(logging.WARNING, logger="t"):
        for _ in range(50):
            outage.failed(ConnectionError("Connection refused\nmore"))
            clock.now += 1
        assert not outage.healthy
        assert outage.down_for == timedelta(seconds=50)
        outage.succeeded()
        outage.succeeded()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "Redis is unreachable (ConnectionError: Connection refused); retrying until it is back",
        "Redis is back after 50.0 s (50 failed tries)",
    ]
    assert outage.healthy
    assert outage.down_for == timedelta(0)


def test_the_wait_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    outage = Outage("PostgreSQL", logging.getLogger("t"), first_wait=timedelta(seconds=0.1),
                    max_wait=timedelta(seconds=1))
    waits = [outage.failed(OSError("down")) for _ in range(6)]
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    outage.succeeded()
    assert outage.failed(OSError("down")) == pytest.approx(0.1)
