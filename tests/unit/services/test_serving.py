"""Which types are unserved, and the API's short-lived view of the live workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import redis

from common.domain.worker_types import dispatched_as
from scheduler.services.serving import ServedTypes, unserved_warnings, waiting_for


def test_a_bound_task_is_served_by_whoever_serves_its_engine() -> None:
    assert dispatched_as("billing", {"engine": "webservice"}) == "webservice"
    assert dispatched_as("render", None) == "render"
    assert unserved_warnings([("billing", {"engine": "webservice"})],
                             frozenset({"webservice"})) == []
    assert waiting_for("READY", "billing", {"engine": "http"}, frozenset({"webservice"})) == (
        "no worker serves type 'billing'")


def test_only_ready_tasks_wait_and_unknown_serving_says_nothing() -> None:
    assert waiting_for("ACTIVE", "render", None, frozenset()) is None
    assert waiting_for("READY", "render", None, None) is None
    assert unserved_warnings([("render", None)], None) == []
    assert len(unserved_warnings([("render", None), ("render", None)], frozenset())) == 1


def test_the_live_workers_are_read_at_most_once_a_second_and_redis_errors_say_nothing() -> None:
    calls: list[float] = []
    now = [0.0]
    answers: list[Sequence[Mapping[str, Any]] | Exception] = [
        [{"types": ["noop", "sleep"]}], redis.ConnectionError("down"), [{"types": "shell"}]]

    def fetch() -> Sequence[Mapping[str, Any]]:
        calls.append(now[0])
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    served = ServedTypes(fetch, timedelta(seconds=1), clock=lambda: now[0])
    assert served() == frozenset({"noop", "sleep"})
    now[0] = 0.5
    assert served() == frozenset({"noop", "sleep"})
    now[0] = 1.5
    assert served() is None
    assert served() == frozenset({"shell"})
    assert calls == [0.0, 1.5, 1.5]


def test_while_one_request_reads_the_workers_the_others_answer_with_the_last_reading() -> None:
    now = [0.0]
    served = ServedTypes(lambda: [{"types": ["noop"]}], timedelta(seconds=1),
                         clock=lambda: now[0])
    assert served() == frozenset({"noop"})
    now[0] = 5.0
    with served._reading:  # another request is reading
        assert served() == frozenset({"noop"})
    served.fetch_workers = lambda: [{"types": ["shell"]}]
    assert served() == frozenset({"shell"})


def test_it_says_when_a_call_would_read_redis() -> None:
    """The API's routes on the event loop send a call that would read Redis to a thread:
    one call, while the others answer with the last reading."""
    now = [0.0]
    served = ServedTypes(lambda: [{"types": ["noop"]}], timedelta(seconds=1),
                         clock=lambda: now[0])
    assert served.would_read()
    served()
    now[0] = 0.9
    assert not served.would_read()
    now[0] = 1.0
    assert served.would_read()
    with served._reading:  # another call is reading
        assert not served.would_read()
