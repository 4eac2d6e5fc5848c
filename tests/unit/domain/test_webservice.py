"""Web-service vocabulary and worker types: status mapping, headers, URLs, binding."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from common.domain.patch import JobPatch
from common.domain.spec import JobSpec, TaskDefaults, TaskSpec
from common.domain.webservice import WebServiceSettings, outcome_of_status, overlay_headers
from common.domain.worker_types import RegisteredType, WorkerTemplate, WorkerTypeSpec, bind
from scheduler.engine.reported import Report


@pytest.mark.parametrize(("status", "outcome"), [
    (200, "COMPLETED"), (201, "COMPLETED"), (204, "COMPLETED"), (299, "COMPLETED"),
    (301, "FAILED"), (400, "FAILED"), (401, "REJECTED"), (403, "REJECTED"), (404, "FAILED"),
    (409, "REJECTED"), (429, "FAILED"), (500, "FAILED"), (503, "FAILED"), (100, "FAILED"),
])
def test_status_mapping(status: int, outcome: str) -> None:
    assert outcome_of_status(status) == outcome


@given(st.integers(min_value=100, max_value=599))
def test_only_2xx_completes_and_only_401_403_409_reject(status: int) -> None:
    outcome = outcome_of_status(status)
    assert (outcome == "COMPLETED") == (200 <= status <= 299)
    assert (outcome == "REJECTED") == (status in {401, 403, 409})


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"url": "ftp://example.com/x"}, "http:// or https://"),
    ({"url": "https:///no-host"}, "http:// or https://"),
    ({"url": "https://user:pw@example.com/"}, "credentials"),
    ({"headers": {"Bad Name": "x"}}, "not an HTTP token"),
    ({"headers": {"X-Key": "a\r\nX-Evil: 1"}}, "one line"),
    ({"headers": {"Content-Length": "5"}}, "set by the HTTP client"),
    ({"headers": {f"X-{i}": "v" for i in range(51)}}, "at most 50 headers"),
])
def test_bad_urls_and_headers_are_refused_naming_the_fault(
    settings: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        WebServiceSettings.model_validate(settings)
    messages = " ".join(error["msg"] for error in caught.value.errors())
    assert fragment in messages
    assert "X-Evil: 1" not in messages  # header values are never echoed (the API shows msg)


def test_headers_overlay_without_regard_to_case() -> None:
    merged = overlay_headers({"X-Key": "type", "Accept": "a"}, {"x-key": "job"})
    assert merged == {"Accept": "a", "x-key": "job"}


def test_a_worker_type_may_not_shadow_a_builtin_type_or_set_url_in_its_template() -> None:
    with pytest.raises(ValidationError, match="built-in task type"):
        WorkerTypeSpec(name="shell", url="https://ws.example/")
    with pytest.raises(ValidationError, match="not a task type"):
        WorkerTypeSpec(name="no spaces", url="https://ws.example/")
    with pytest.raises(ValidationError, match="set on the worker type itself"):
        WorkerTemplate(params={"url": "https://other/"})


def registered(**template: Any) -> RegisteredType:
    return RegisteredType(
        name="render", engine="webservice", url="https://type.example/run",
        headers={"Authorization": "Bearer type", "X-Team": "type"},
        template=WorkerTemplate.model_validate(template),
    )


def test_binding_merges_url_params_and_headers_in_order() -> None:
    task = TaskSpec(name="t", type="render", params={"frames": 3},
                    secure_params={"key": "s", "headers": {"X-Task": "task"}})
    job = WebServiceSettings(url="https://job.example/run", headers={"x-team": "job"})
    bound = bind(task, registered(params={"quality": "high", "frames": 1}), job, TaskDefaults())
    assert (bound.engine, bound.worker_type) == ("webservice", "render")
    assert bound.params == {"quality": "high", "frames": 3, "url": "https://job.example/run"}
    assert bound.secure_params == {"key": "s", "headers": {
        "Authorization": "Bearer type", "x-team": "job", "X-Task": "task"}}


def test_binding_without_job_settings_uses_the_type_url_and_a_tasks_own_url_wins() -> None:
    plain = bind(TaskSpec(name="t", type="render"), registered(), None, TaskDefaults())
    assert plain.params == {"url": "https://type.example/run"}
    own = TaskSpec(name="t", type="render", params={"url": "https://task.example/"})
    assert bind(own, registered(), None, TaskDefaults()).params["url"] == "https://task.example/"


def test_the_template_sits_between_the_task_and_the_job_defaults() -> None:
    defaults = TaskDefaults(timeout=timedelta(hours=1), retries=2)
    bound = bind(TaskSpec(name="t", type="render"), registered(timeout=30), None, defaults)
    assert bound.defaults == TaskDefaults(timeout=timedelta(seconds=30), retries=2)


def test_bad_task_headers_are_refused() -> None:
    task = TaskSpec(name="t", type="render", secure_params={"headers": "not-an-object"})
    with pytest.raises(ValueError, match="headers"):
        bind(task, registered(), None, TaskDefaults())


def test_a_patch_of_webservice_keeps_the_write_only_headers_unless_it_names_them() -> None:
    current = JobSpec(name="j", tasks=[{"name": "t", "type": "render"}],
                      webservice={"url": "https://a.example/", "headers": {"X-Key": "k"}})
    moved = JobPatch(webservice={"url": "https://b.example/"}).apply(current)
    assert moved.webservice == WebServiceSettings(url="https://b.example/",
                                                  headers={"X-Key": "k"})
    cleared = JobPatch(webservice={"url": "https://b.example/", "headers": {}}).apply(current)
    assert cleared.webservice is not None and cleared.webservice.headers == {}
    assert JobPatch(webservice=None).apply(current).webservice is None
    assert JobPatch(name="k").apply(current).webservice == current.webservice


def test_an_outcome_repeated_word_for_word_has_the_same_id() -> None:
    task_run = uuid.uuid4()
    first = Report("finished", None, "COMPLETED", {"n": 1}, "done")
    assert first.repeat_id(task_run, 1) == Report(
        "finished", 1, "COMPLETED", {"n": 1}, "done").repeat_id(task_run, 1)
    assert first.repeat_id(task_run, 1) != first.repeat_id(task_run, 2)
    assert first.repeat_id(task_run, 1) != Report(
        "finished", None, "COMPLETED", {"n": 2}, "done").repeat_id(task_run, 1)
    assert Report("heartbeat").repeat_id(task_run, 1) is None
