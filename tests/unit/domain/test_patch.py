"""Applying a PATCH to a job spec: fields replace whole, secrets of kept tasks stay."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from common.domain.patch import DEFINITION_FIELDS, JobPatch
from common.domain.spec import JobSpec


def spec() -> JobSpec:
    return JobSpec.model_validate({
        "name": "backup", "labels": {"team": "ops", "tier": "1"},
        "schedule": {"cron": "0 10 * * *", "timezone": "Europe/Berlin"},
        "tasks": [
            {"name": "a", "type": "noop", "next": ["b"], "secure_params": {"key": "s3cret"}},
            {"name": "b", "type": "noop"},
        ],
    })


def test_given_fields_replace_whole_and_the_rest_is_kept() -> None:
    patch = JobPatch.model_validate({"labels": {"team": "dev"}, "schedule": {"cron": "5 * * * *"}})

    patched = patch.apply(spec())

    assert patched.labels == {"team": "dev"}
    assert (patched.schedule.cron, patched.schedule.timezone) == ("5 * * * *", "UTC")
    assert (patched.name, [t.name for t in patched.tasks]) == ("backup", ["a", "b"])
    assert patch.given() == {"labels", "schedule"}
    assert not patch.given() & DEFINITION_FIELDS


def test_a_task_that_does_not_mention_its_secrets_keeps_them() -> None:
    patch = JobPatch.model_validate({"tasks": [
        {"name": "a", "type": "noop", "params": {"n": 1}},
        {"name": "b", "type": "noop", "secure_params": None},
    ]})

    tasks = {task.name: task for task in patch.apply(spec()).tasks}

    assert tasks["a"].secure_params == {"key": "s3cret"}
    assert tasks["a"].params == {"n": 1}
    assert tasks["b"].secure_params is None


def test_the_result_obeys_the_rules_of_a_create() -> None:
    cycle = JobPatch.model_validate({"tasks": [
        {"name": "a", "type": "noop", "next": ["b"]}, {"name": "b", "type": "noop", "next": ["a"]},
    ]})
    with pytest.raises(ValidationError, match="cycle"):
        cycle.apply(spec())
    with pytest.raises(ValidationError, match="name"):
        JobPatch.model_validate({"name": None}).apply(spec())
    with pytest.raises(ValidationError, match="draft"):
        JobPatch.model_validate({"draft": False})
