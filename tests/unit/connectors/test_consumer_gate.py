"""The consumer's bound on attempts held, and how it counts a message's attempts."""

from __future__ import annotations

import threading
from datetime import timedelta

from common.messaging.messages import EXECUTE_BUNDLE_TASK, EXECUTE_TASK
from connectors.consumer import Gate, attempt_count

SHORT = timedelta(milliseconds=10)


def test_the_gate_closes_at_its_limit_and_opens_on_release() -> None:
    gate = Gate(limit=3)
    assert gate.wait_for_room(SHORT)
    gate.take(3)
    assert not gate.wait_for_room(SHORT)
    opened = threading.Timer(0.05, gate.release)
    opened.start()
    assert gate.wait_for_room(timedelta(seconds=5))
    assert gate.held == 2
    opened.join()


def test_a_bundle_counts_its_dispatches_and_anything_else_one() -> None:
    assert attempt_count(EXECUTE_BUNDLE_TASK, {"dispatches": [{}, {}, {}]}) == 3
    assert attempt_count(EXECUTE_TASK, {"dispatches": [{}, {}]}) == 1
    assert attempt_count(EXECUTE_BUNDLE_TASK, {"dispatches": "junk"}) == 1
    assert attempt_count(EXECUTE_BUNDLE_TASK, None) == 1
