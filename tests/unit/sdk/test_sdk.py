"""``stellwerk.sdk``: jobs as Python code, whose specs the REST API takes (issue 17)."""

from __future__ import annotations

import pytest

from common.domain.spec import JobSpec
from stellwerk.sdk import Job, Task, jobs_of


def a_job() -> Job:
    job = Job("nightly", schedule={"cron": "30 2 * * *"}, labels={"team": "ops"})
    fetch = job.task("fetch", "noop")
    left = job.task("left", "sleep", params={"seconds": 1})
    right = job.task("right", "shell", params={"argv": ["true"]}, retries=2)
    job.task("join", "noop", after=[left, right])
    fetch >> [left, right]
    return job


def test_a_job_s_spec_is_one_the_api_takes() -> None:
    spec = a_job().spec()
    assert spec["name"] == "nightly" and spec["schedule"] == {"cron": "30 2 * * *"}
    tasks = {task["name"]: task for task in spec["tasks"]}
    assert tasks["fetch"]["next"] == ["left", "right"]
    assert tasks["left"]["next"] == ["join"] and tasks["right"]["retries"] == 2
    assert JobSpec.model_validate(spec).graph()  # valid: names, types, no cycle


def test_chaining_twice_adds_a_successor_once_and_names_are_unique() -> None:
    a, b = Task("a", "noop"), Task("b", "noop")
    a >> b
    a >> b
    assert a.next == ["b"]
    job = Job("j")
    job.task("x", "noop")
    with pytest.raises(ValueError, match="'x' already"):
        job.task("x", "noop")


def test_jobs_are_found_in_a_job_a_list_or_a_function() -> None:
    job = a_job()
    assert jobs_of(job) == [job]
    assert jobs_of([job, job]) == [job, job]
    assert jobs_of(lambda: [job]) == [job]
    with pytest.raises(TypeError, match="stellwerk.sdk.Job"):
        jobs_of({"name": "a dict is no job"})
