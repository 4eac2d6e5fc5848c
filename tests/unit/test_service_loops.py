"""Several loops in one process stop together (``scheduler.service.Together``)."""

from __future__ import annotations

import threading

import pytest

from scheduler.service import Together


class Waits:
    """A loop that runs until it is stopped."""

    def __init__(self) -> None:
        self.stopping = threading.Event()

    def run(self) -> None:
        self.stopping.wait(30)


class Fails:
    """A loop that fails at once."""

    def __init__(self) -> None:
        self.stopping = threading.Event()

    def run(self) -> None:
        raise ValueError("broken")


def test_stopping_the_whole_stops_every_loop() -> None:
    loops = [Waits(), Waits()]
    together = Together(loops)
    together.stopping.set()
    together.run()
    assert all(loop.stopping.is_set() for loop in loops)


def test_one_failing_loop_stops_the_others_and_is_raised() -> None:
    survivor = Waits()
    with pytest.raises(RuntimeError, match="broken"):
        Together([survivor, Fails()]).run()
    assert survivor.stopping.is_set()
