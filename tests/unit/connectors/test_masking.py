"""Secure header values an endpoint echoes never come back as the task's output."""

from __future__ import annotations

from connectors.endings import Finished
from connectors.http_task import masked


def test_secure_values_are_masked_everywhere_in_the_ending() -> None:
    ending = Finished(
        "FAILED", "denied for Bearer tok-123456",
        {"json": {"headers": {"Authorization": "Bearer tok-123456", "X-Key": "k9k9k9"},
                  "seen": ["k9k9k9", 5], "tok-123456": True}},
        log=("echo tok-123456",),
    )
    result = masked(ending, ("Bearer tok-123456", "k9k9k9", "abc"))
    assert result == Finished(
        "FAILED", "denied for ***",
        {"json": {"headers": {"Authorization": "***", "X-Key": "***"},
                  "seen": ["***", 5], "tok-123456": True}},
        log=("echo tok-123456",),
    )


def test_the_longest_value_is_masked_first_and_short_ones_not_at_all() -> None:
    result = masked(Finished("COMPLETED", output={"t": "Bearer abcd abcd x"}),
                    ("abcd", "Bearer abcd", "x"))
    assert result.output == {"t": "*** *** x"}
    unchanged = Finished("COMPLETED", output={"t": "abc"})
    assert masked(unchanged, ("abc",)) is unchanged
