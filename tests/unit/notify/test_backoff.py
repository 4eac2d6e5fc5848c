"""Retry delays and the end of a delivery's tries, without servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scheduler.notify.backoff import NextStep, RetryPolicy, after_attempt, retry_delay

NOW = datetime(2030, 1, 1, tzinfo=UTC)
POLICY = RetryPolicy(max_attempts=5, base=timedelta(seconds=2), cap=timedelta(minutes=1))

seconds = st.floats(min_value=0.001, max_value=3600)
rand = st.floats(min_value=0, max_value=1, exclude_max=True)


@given(retry=st.integers(1, 10_000), base=seconds, cap=seconds, r=rand)
def test_a_delay_lies_between_half_and_all_of_the_capped_exponential(
    retry: int, base: float, cap: float, r: float
) -> None:
    policy = RetryPolicy(10, timedelta(seconds=base), timedelta(seconds=cap))
    full = min(cap, base * 2.0 ** min(retry - 1, 60))
    delay = retry_delay(retry, policy, r).total_seconds()
    assert full / 2 - 1e-6 <= delay <= full + 1e-6
    assert delay <= cap + 1e-6


@given(retry=st.integers(1, 20), r=rand)
def test_the_longest_possible_wait_doubles_until_the_cap(retry: int, r: float) -> None:
    hi = retry_delay(retry, POLICY, 0.999999)
    next_hi = retry_delay(retry + 1, POLICY, 0.999999)
    assert next_hi >= hi
    assert next_hi <= max(2 * hi, POLICY.cap) + timedelta(milliseconds=1)


def test_the_first_retries_follow_the_base() -> None:
    assert retry_delay(1, POLICY, 0.0) == timedelta(seconds=1)
    assert retry_delay(1, POLICY, 0.999999) < timedelta(seconds=2)
    assert retry_delay(3, POLICY, 0.0) == timedelta(seconds=4)


def test_success_delivers_failure_retries_and_the_last_failure_is_dead() -> None:
    assert after_attempt(1, True, POLICY, NOW, 0.5).state == "delivered"
    retry = after_attempt(1, False, POLICY, NOW, 0.5)
    assert retry.state == "pending"
    assert retry.due_at == NOW + retry_delay(1, POLICY, 0.5)
    assert after_attempt(4, False, POLICY, NOW, 0.5).state == "pending"
    dead = after_attempt(5, False, POLICY, NOW, 0.5)
    assert (dead.state, dead.due_at) == ("dead", None)
    assert after_attempt(5, True, POLICY, NOW, 0.5).state == "delivered"


def test_a_permanent_failure_is_dead_at_once() -> None:
    # A webhook the egress policy refuses: no later try could pass (issue 14).
    assert after_attempt(1, False, POLICY, NOW, 0.5, permanent=True) == NextStep("dead", None)
    assert after_attempt(1, False, POLICY, NOW, 0.5).state == "pending"
