"""The pod and Secret a ``kubernetes`` task runs as, and what pod statuses mean: pure code."""

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from pydantic import ValidationError

from common.domain.builtin_params import PodParams
from workers.builtin.podspec import (
    build_pod,
    build_secret,
    owner_patch,
    pod_name,
)
from workers.builtin.podstatus import PodView, pod_outcome, view_pod
from workers.context import TaskContext
from workers.outcomes import Completed, Failed

SECRET = "s3cr3t-value"


def context(**fields: Any) -> TaskContext:
    values: dict[str, Any] = {
        "job_id": UUID(int=1),
        "run_id": UUID(int=2),
        "task_run_id": UUID(int=3),
        "tenant": "acme",
        "job_name": "nightly",
        "task": "dump",
        "attempt": 2,
        "timeout_s": 600.0,
        "job_params": {"db": "main"},
        "job_secure_params": {"pw": SECRET},
        "secure_params": {"token": "task-" + SECRET},
        "storage": {"cursor": 41},
        "last_success_start": datetime(2024, 5, 1, 8, 30, tzinfo=UTC),
        "params": {"image": "busybox:1.36"},
    }
    values.update(fields)
    return TaskContext(**values)


def pod_for(ctx: TaskContext, **params: Any) -> dict[str, Any]:
    parsed = PodParams.model_validate({"image": "busybox:1.36", **params})
    return build_pod(ctx, parsed, pod_name(ctx.idempotency_key), "jobs")


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod["spec"]["containers"]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def test_the_pod_name_comes_from_the_attempt_and_is_a_dns_label() -> None:
    ctx = context()
    name = pod_name(ctx.idempotency_key)
    assert name == f"stellwerk-{UUID(int=3)}-2"
    assert name == pod_name(context().idempotency_key)  # a redelivery finds the same pod
    assert name != pod_name(context(attempt=3).idempotency_key)
    long = pod_name("X" * 100 + ":1")
    assert len(long) <= 63
    assert long == long.lower()
    assert long[-1] != "-"
    assert long != pod_name("X" * 101 + ":1")


def test_the_container_gets_the_shell_environment_contract() -> None:
    env = env_of(pod_for(context(), env={"EXTRA": "yes", "JOB_ID": "spoofed"}))
    assert env["JOB_ID"] == str(UUID(int=1))
    assert env["RUN_ID"] == str(UUID(int=2))
    assert env["TENANT_ID"] == "acme"
    assert json.loads(env["JOB_PARAMS"]) == {"db": "main"}
    assert json.loads(env["JOB_STORAGE"]) == {"cursor": 41}
    assert env["LAST_SUCCESS_START"] == "2024-05-01T08:30:00+00:00"
    assert env["LAST_SUCCESS_FINISH"] == ""
    assert env["TASK_NAME"] == "dump"
    assert env["ATTEMPT"] == "2"
    assert env["EXTRA"] == "yes"


def test_secure_params_are_only_referenced_from_the_pod_and_held_by_the_secret() -> None:
    ctx = context()
    name = pod_name(ctx.idempotency_key)
    pod = pod_for(ctx)
    assert SECRET not in json.dumps(pod)
    env = env_of(pod)
    for key in ("JOB_SECURE_PARAMS", "TASK_SECURE_PARAMS"):
        assert env[key] == {"secretKeyRef": {"name": name, "key": key}}
    secret = build_secret(ctx, name, "jobs")
    assert secret["metadata"]["name"] == name
    assert secret["metadata"]["namespace"] == "jobs"
    assert json.loads(secret["stringData"]["JOB_SECURE_PARAMS"]) == {"pw": SECRET}
    assert json.loads(secret["stringData"]["TASK_SECURE_PARAMS"]) == {"token": "task-" + SECRET}


def test_without_secure_params_no_secret_is_referenced() -> None:
    env = env_of(pod_for(context(job_secure_params={}, secure_params={})))
    assert env["JOB_SECURE_PARAMS"] == "{}"
    assert env["TASK_SECURE_PARAMS"] == "{}"


def test_the_pod_runs_once_with_labels_resources_and_a_deadline() -> None:
    pod = pod_for(
        context(),
        command=["sh", "-c", "echo hi"],
        resources={"requests": {"cpu": "100m", "memory": 64}, "limits": {"cpu": 1}},
    )
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert spec["activeDeadlineSeconds"] == 600 + 60
    (container,) = spec["containers"]
    assert container["image"] == "busybox:1.36"
    assert container["command"] == ["sh", "-c", "echo hi"]
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "64"},
        "limits": {"cpu": "1"},
    }
    assert pod["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "stellwerk",
        "stellwerk.io/run-id": str(UUID(int=2)),
        "stellwerk.io/job-id": str(UUID(int=1)),
        "stellwerk.io/task-run-id": str(UUID(int=3)),
        "stellwerk.io/attempt": "2",
    }
    assert pod["metadata"]["annotations"]["stellwerk.io/task"] == "dump"
    assert pod["metadata"]["namespace"] == "jobs"


def test_without_a_command_the_image_entrypoint_runs_and_no_resources_are_set() -> None:
    (container,) = pod_for(context())["spec"]["containers"]
    assert "command" not in container
    assert container["resources"] == {}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"image": ""},
        {"image": "x", "command": []},
        {"image": "x", "namespace": "Not_A_Label"},
        {"image": "x", "resources": {"request": {"cpu": "1"}}},
    ],
)
def test_bad_params_are_refused(params: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PodParams.model_validate(params)


def test_the_secret_is_made_owned_by_the_pod() -> None:
    pod = {"metadata": {"name": "p", "uid": "u-1"}}
    assert owner_patch(pod) == {
        "metadata": {
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1"}]
        }
    }


def status(phase: str, state: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    containers = [{"name": "task", "state": state}] if state is not None else []
    return {"status": {"phase": phase, "containerStatuses": containers, **extra}}


def test_pod_phases_are_read() -> None:
    assert view_pod({}) == PodView("Pending")
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": "nope"}}
    pulling = view_pod(status("Pending", waiting))
    assert (pulling.started, pulling.finished, pulling.hopeless) == (False, False, False)
    assert pulling.reason == "ImagePullBackOff: nope"
    assert view_pod(status("Pending", {"waiting": {"reason": "InvalidImageName"}})).hopeless
    running = view_pod(status("Running", {"running": {}}))
    assert (running.started, running.finished) == (True, False)
    done = view_pod(status("Failed", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))
    assert (done.started, done.finished, done.exit_code, done.reason) == (
        True, True, 137, "OOMKilled"
    )


def test_finished_pods_become_outcomes() -> None:
    output = {"pod": "p"}
    succeeded = view_pod(status("Succeeded", {"terminated": {"exitCode": 0}}))
    assert pod_outcome(succeeded, output) == Completed({"pod": "p", "exit_code": 0})
    failed = view_pod(status("Failed", {"terminated": {"exitCode": 3, "reason": "Error"}}))
    assert pod_outcome(failed, output) == Failed(
        "exit code 3 (Error)", {"pod": "p", "exit_code": 3}
    )
    evicted = view_pod(status("Failed", reason="DeadlineExceeded", message="too slow"))
    assert pod_outcome(evicted, output) == Failed(
        "pod failed: DeadlineExceeded: too slow", {"pod": "p", "exit_code": None}
    )
