"""When a batch waits to grow (``STELLWERK_ENGINE_BATCH_WAIT_MS``): only when the engine
is behind, never for a message that found it waiting (issue 18)."""

from __future__ import annotations

import pytest

from scheduler.engine.consumer import LINGER_BELOW, LINGER_WHEN_BUSY, lingers

BATCH = 500


@pytest.mark.parametrize(("case", "waited", "busy", "taken", "expected"), [
    ("cron fires queued behind a busy engine", False, 0.9, 2, True),
    ("a chain's next step, the engine waiting for it", True, 0.9, 1, False),
    ("queued, but the engine mostly idle", False, LINGER_WHEN_BUSY / 2, 2, False),
    ("busy exactly at the threshold", False, LINGER_WHEN_BUSY, 2, True),
    ("a bundle of results, big enough already", False, 0.9, LINGER_BELOW, False),
    ("one short of big enough", False, 0.9, LINGER_BELOW - 1, True),
])
def test_a_batch_waits_to_grow_only_while_the_engine_is_behind(
    case: str, waited: bool, busy: float, taken: int, expected: bool,
) -> None:
    assert lingers(waited=waited, busy=busy, taken=taken, batch_size=BATCH) is expected, case
