"""Flow settings in a job spec: keys rendered at submit, bad input named (issue 16)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from common.domain.flow_spec import FlowNeeds
from common.domain.spec import JobSpec


def spec(task: dict[str, Any], **job: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "reports", "tenant": "acme", **job,
                                   "tasks": [{"name": "eu", "type": "noop", **task}]})


def refused(task: dict[str, Any], **job: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        spec(task, **job)
    return str(caught.value)


def test_keys_render_from_params_job_tenant_type_and_task() -> None:
    job = spec({"params": {"region": "eu"}, "concurrency": [
        {"key": "db-{params.region}", "limit": 2},
        {"key": "{job}/{tenant}/{type}/{task}/{params.shard}", "limit": 1},
    ]}, params={"shard": 7})
    needs = job.flow_needs(job.tasks[0])
    assert needs.concurrency == (("key:db-eu", 2), ("key:reports/acme/noop/eu/7", 1))


def test_a_rate_renders_with_its_window_in_seconds() -> None:
    job = spec({"rate": {"key": "github", "limit": 100, "per": 60}})
    assert job.flow_needs(job.tasks[0]).rate == ("rate:github", 100, 60.0)


def test_a_job_default_applies_unless_the_task_sets_its_own() -> None:
    defaults = {"concurrency": [{"key": "db", "limit": 3}]}
    job = spec({}, task_defaults=defaults)
    assert job.flow_needs(job.tasks[0]).concurrency == (("key:db", 3),)
    job = spec({"concurrency": []}, task_defaults=defaults)
    assert job.flow_needs(job.tasks[0]) == FlowNeeds()


def test_needs_survive_their_stored_form() -> None:
    job = spec({"concurrency": [{"key": "db", "limit": 2}],
                "rate": {"key": "gh", "limit": 5, "per": 1.5}})
    needs = job.flow_needs(job.tasks[0])
    assert FlowNeeds.from_json(needs.to_json()) == needs


@pytest.mark.parametrize(("task", "named"), [
    ({"concurrency": [{"key": "db-{region}", "limit": 2}]}, "unknown variable {region}"),
    ({"concurrency": [{"key": "db-{params.region}", "limit": 2}]},
     "unknown variable {params.region}"),
    ({"concurrency": [{"key": "db", "limit": 0}]}, "limit"),
    ({"concurrency": [{"key": "db", "limit": -1}]}, "limit"),
    ({"rate": {"key": "gh", "limit": 10, "per": 0}}, "per"),
    ({"concurrency": [{"key": "x" * 201, "limit": 1}]}, "key"),
    ({"params": {"p": "y" * 200}, "concurrency": [{"key": "k{params.p}", "limit": 1}]},
     "over 200"),
    ({"params": {"p": {"a": 1}}, "concurrency": [{"key": "{params.p}", "limit": 1}]},
     "not a single value"),
])
def test_bad_flow_settings_are_refused_naming_what_is_wrong(
    task: dict[str, Any], named: str
) -> None:
    assert named in refused(task)
