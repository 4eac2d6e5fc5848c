"""Subscription specs and matching: event patterns and selectors, without servers."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from common.domain.subscriptions import (
    EventFacts,
    Rule,
    SubscriptionSpec,
    event_matches,
    selects,
)

JOB = uuid.uuid4()
FACTS = EventFacts("run.started", JOB, "backup", "crm", "acme")
WEBHOOK = {"webhook": {"url": "https://example.com/hook", "secret": "s3cret"}}


@pytest.mark.parametrize(("patterns", "event", "expected"), [
    (("run.*",), "run.started", True),
    (("run.*",), "task.failed", False),
    (("task.failed",), "task.failed", True),
    (("task.failed",), "task.failed.x", False),
    (("*",), "subscription.created", True),
    (("run.?one",), "run.done", True),
    (("task.[fc]*",), "task.completed", True),
    (("run.*", "task.failed"), "task.failed", True),
    (("RUN.*",), "run.started", False),  # names are lower case; matching is exact
])
def test_event_patterns_are_shell_style(patterns: tuple[str, ...], event: str,
                                        expected: bool) -> None:
    assert event_matches(patterns, event) is expected


def test_an_empty_selector_takes_every_job() -> None:
    assert selects(Rule(("*",)), FACTS)
    assert selects(Rule(("*",)), EventFacts("subscription.created"))


@pytest.mark.parametrize("field", ["job_id", "job_type", "application", "tenant"])
def test_each_selector_field_must_match(field: str) -> None:
    events = ("run.*",)
    fitting = {"job_id": Rule(events, job_id=JOB), "job_type": Rule(events, job_type="backup"),
               "application": Rule(events, application="crm"),
               "tenant": Rule(events, tenant="acme")}
    other = {"job_id": Rule(events, job_id=uuid.uuid4()), "job_type": Rule(events, job_type="x"),
             "application": Rule(events, application="x"), "tenant": Rule(events, tenant="x")}
    assert selects(fitting[field], FACTS)
    assert not selects(other[field], FACTS)


def test_selector_fields_are_anded_with_the_patterns() -> None:
    rule = Rule(("task.*",), job_id=JOB, tenant="acme")
    assert not selects(rule, FACTS)  # run.started is no task.* event
    assert selects(rule, EventFacts("task.failed", JOB, tenant="acme"))
    assert not selects(rule, EventFacts("task.failed", JOB, tenant="other"))


@given(st.from_regex(r"[a-z]{1,8}\.[a-z_]{1,12}", fullmatch=True))
def test_star_and_the_name_itself_always_match(name: str) -> None:
    assert event_matches(("*",), name)
    assert event_matches((name,), name)
    assert event_matches((name.split(".", maxsplit=1)[0] + ".*",), name)


def test_a_spec_needs_exactly_one_target() -> None:
    SubscriptionSpec.model_validate({"events": ["run.*"], "target": WEBHOOK})
    SubscriptionSpec.model_validate({"events": ["*"], "target": {"celery_task": "app.on_event"}})
    for target in ({}, {**WEBHOOK, "celery_task": "t"}, {**WEBHOOK, "queue": "q"}):
        with pytest.raises(ValidationError):
            SubscriptionSpec.model_validate({"events": ["*"], "target": target})


@pytest.mark.parametrize(("body", "where"), [
    ({"events": [], "target": WEBHOOK}, "events"),
    ({"events": ["Run Started"], "target": WEBHOOK}, "events"),
    ({"events": ["*"], "target": {"webhook": {"url": "ftp://x", "secret": "s"}}}, "url"),
    ({"events": ["*"], "target": {"webhook": {"url": "http://x", "secret": ""}}}, "secret"),
    ({"events": ["*"], "target": {"webhook": {"url": "http://x", "secret": "s",
                                              "headers": {"X-Stellwerk-Event": "x"}}}}, "headers"),
    ({"events": ["*"], "target": {"webhook": {"url": "http://x", "secret": "s",
                                              "headers": {"Bad Name": "x"}}}}, "headers"),
    ({"events": ["*"], "target": {"webhook": {"url": "http://x", "secret": "s",
                                              "headers": {"X-A": "a\r\nX-B: b"}}}}, "headers"),
    ({"events": ["*"], "selector": {"job_id": "nope"}, "target": WEBHOOK}, "job_id"),
    ({"events": ["*"], "selector": {"owner": "x"}, "target": WEBHOOK}, "owner"),
])
def test_bad_specs_are_refused_naming_the_field(body: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SubscriptionSpec.model_validate(body)
    assert any(where in ".".join(str(p) for p in e["loc"]) for e in caught.value.errors())


def test_the_secret_does_not_show_in_the_spec_repr() -> None:
    spec = SubscriptionSpec.model_validate({"events": ["*"], "target": WEBHOOK})
    assert "s3cret" not in repr(spec)
    assert "s3cret" not in spec.model_dump_json()
