"""The Pod and Secret a ``kubernetes`` task runs as: pure manifests, JSON as the API takes it.

The container gets the environment contract of a ``shell`` process (docs/job-spec.md,
:func:`workers.builtin.shellenv.contract_variables`), except that the secure params
never appear in the pod spec: they live in a Secret of the same name, referenced with
``secretKeyRef``, so that reading the pod (``kubectl get pod -o yaml``, an audit log)
does not reveal them. The Secret is made owned by the pod once the pod exists (see
:func:`owner_patch`), so the cluster deletes it with the pod.

Names come from the attempt's idempotency key: a redelivered attempt computes the same
name, finds its pod already there and follows it instead of starting a second one.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from common.domain.builtin_params import PodParams
from workers.builtin.shellenv import contract_variables
from workers.context import TaskContext

CONTAINER = "task"
MANAGED_BY = {"app.kubernetes.io/managed-by": "stellwerk"}
RUN_LABEL = "stellwerk.io/run-id"
JOB_LABEL = "stellwerk.io/job-id"
TASK_RUN_LABEL = "stellwerk.io/task-run-id"
ATTEMPT_LABEL = "stellwerk.io/attempt"
SECURE_VARIABLES = ("JOB_SECURE_PARAMS", "TASK_SECURE_PARAMS")
# The cluster's own deadline is a safety net for a worker that died: it lets the
# worker's timeout (which reports TIMEOUT) come first.
DEADLINE_MARGIN_S = 60
MAX_NAME_CHARS = 63


def pod_name(idempotency_key: str) -> str:
    """``stellwerk-<task run id>-<attempt>``: a DNS label, the same for every delivery."""
    name = re.sub(r"[^a-z0-9-]+", "-", f"stellwerk-{idempotency_key}".lower()).strip("-")
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:10]
    return f"{name[: MAX_NAME_CHARS - len(digest) - 1].rstrip('-')}-{digest}"


def has_secrets(ctx: TaskContext) -> bool:
    """Whether the attempt has secure params, and so needs a Secret."""
    return bool(ctx.secure_params or ctx.job_secure_params)


def labels(ctx: TaskContext) -> dict[str, str]:
    """What finds a task's pods and Secrets again (``kubectl get pods -l ...``)."""
    return {
        **MANAGED_BY,
        RUN_LABEL: str(ctx.run_id),
        JOB_LABEL: str(ctx.job_id),
        TASK_RUN_LABEL: str(ctx.task_run_id),
        ATTEMPT_LABEL: str(ctx.attempt),
    }


def build_secret(ctx: TaskContext, name: str, namespace: str) -> dict[str, Any]:
    """The Secret holding the attempt's secure params, one key per secure variable."""
    variables = contract_variables(ctx)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(ctx)},
        "type": "Opaque",
        "stringData": {key: variables[key] for key in SECURE_VARIABLES},
    }


def build_pod(
    ctx: TaskContext, params: PodParams, name: str, namespace: str
) -> dict[str, Any]:
    """The Pod that runs the attempt once (``restartPolicy: Never``)."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": params.image,
        "env": container_env(ctx, params.env, secret_name=name),
        "resources": params.resources.model_dump(exclude_defaults=True),
    }
    if params.command is not None:
        container["command"] = params.command
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels(ctx),
            "annotations": {
                "stellwerk.io/job-name": ctx.job_name,
                "stellwerk.io/task": ctx.task,
                "stellwerk.io/idempotency-key": ctx.idempotency_key,
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": math.ceil(ctx.timeout_s) + DEADLINE_MARGIN_S,
            # The job's code gets no API credentials of the namespace by accident.
            "automountServiceAccountToken": False,
            "containers": [container],
        },
    }


def container_env(
    ctx: TaskContext, extra: dict[str, str], secret_name: str
) -> list[dict[str, Any]]:
    """The task's ``env``, then the contract variables; secure ones by reference only."""
    values = {**extra, **contract_variables(ctx)}
    env: list[dict[str, Any]] = []
    for key, value in values.items():
        if key in SECURE_VARIABLES and has_secrets(ctx):
            reference = {"secretKeyRef": {"name": secret_name, "key": key}}
            env.append({"name": key, "valueFrom": reference})
        else:
            env.append({"name": key, "value": value})
    return env


def owner_patch(pod: dict[str, Any]) -> dict[str, Any]:
    """A merge patch making the Secret owned by ``pod``: deleted by the cluster with it."""
    metadata = pod.get("metadata", {})
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
    }
    return {"metadata": {"ownerReferences": [owner]}}
