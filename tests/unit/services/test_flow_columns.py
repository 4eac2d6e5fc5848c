"""``tasks.flow`` built once per distinct setting: the same column as built task by task."""

from __future__ import annotations

from typing import Any

from common.domain.spec import JobSpec
from scheduler.services.jobs import FlowColumns, flow_column


def spec(tasks: list[dict[str, Any]], **job: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "fan", "tasks": tasks, **job})


def task(name: str, **flow: Any) -> dict[str, Any]:
    return {"name": name, "type": "noop", "params": {"region": name[-1]}, **flow}


def columns(job: JobSpec) -> list[dict[str, Any] | None]:
    flows = FlowColumns(job)
    return [flows(t) for t in job.tasks]


def test_tasks_of_one_constant_key_share_one_column_equal_to_each_built_alone() -> None:
    job = spec([task(f"t{i}", concurrency=[{"key": "db", "limit": 2}]) for i in range(3)]
               + [task("free")])
    built = columns(job)
    assert built == [flow_column(t, job) for t in job.tasks]
    assert built[0] is built[1] is built[2]
    assert built[0] is not None and built[0]["concurrency"] == [["key:db", 2]]
    assert built[3] is None


def test_a_key_with_variables_is_rendered_for_each_task() -> None:
    job = spec([task(f"t{i}", concurrency=[{"key": "db-{params.region}", "limit": 2}],
                     rate={"key": "{task}", "limit": 5, "per": 60}) for i in range(2)])
    built = columns(job)
    assert built == [flow_column(t, job) for t in job.tasks]
    assert built[0] != built[1]


def test_defaults_with_variables_are_rendered_and_own_settings_kept_apart() -> None:
    defaults = {"concurrency": [{"key": "{task}", "limit": 1}]}
    job = spec([task("a"), task("b"), task("c", concurrency=[]), task("d", concurrency=[])],
               task_defaults=defaults)
    built = columns(job)
    assert built == [flow_column(t, job) for t in job.tasks]
    assert built[0] != built[1]  # each task's own key from the job's default
    assert built[2] is built[3]  # an explicit "no key" is one setting
