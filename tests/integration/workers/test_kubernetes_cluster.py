"""The ``kubernetes`` processor on a real cluster: runs only when ``KUBECONFIG`` is set.

It creates pods in ``STELLWERK_KUBERNETES_NAMESPACE`` (default ``default``) from
``STELLWERK_TEST_KUBERNETES_IMAGE`` (default ``busybox:1.36``), so the cluster must be
able to pull that image, and the credentials must allow pods and Secrets there. Any
cluster will do, e.g. ``kind create cluster``, then with ``KUBECONFIG=~/.kube/config``:
``.venv/bin/python -m pytest tests/integration/workers/test_kubernetes_cluster.py``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"),
    reason="no cluster: set KUBECONFIG to run the kubernetes processor on a real cluster",
)

IMAGE = os.environ.get("STELLWERK_TEST_KUBERNETES_IMAGE", "busybox:1.36")
SECRET = "real-cluster-secret-value"


@pytest.fixture
def core() -> Iterator[Any]:
    from kubernetes.client import CoreV1Api  # noqa: PLC0415 - only with a cluster

    from workers.builtin.kubeconfig import api_client  # noqa: PLC0415

    with api_client() as client:
        yield CoreV1Api(client)


def context(script: str, **fields: Any) -> Any:
    from workers.context import TaskContext  # noqa: PLC0415

    return TaskContext(
        task_run_id=uuid4(),
        task="real",
        timeout_s=300.0,
        job_secure_params={"pw": SECRET},
        params={"image": IMAGE, "command": ["sh", "-c", script]},
        **fields,
    )


def pod_is_gone(core: Any, ctx: Any, timeout_s: float = 120.0) -> bool:
    """Whether the attempt's pod has disappeared (deletion takes its grace period)."""
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    from workers.builtin.kubeconfig import KubernetesSettings  # noqa: PLC0415
    from workers.builtin.podspec import pod_name  # noqa: PLC0415

    namespace, name = KubernetesSettings().namespace, pod_name(ctx.idempotency_key)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            status: int | None = exc.status  # the client leaves it untyped
            return status == 404
        time.sleep(1)
    return False


def test_a_pod_runs_with_the_env_contract_and_its_exit_code_is_kept(core: Any) -> None:
    from workers.builtin.kubernetes import kubernetes  # noqa: PLC0415
    from workers.outcomes import Failed  # noqa: PLC0415

    script = (
        'echo "hello from $TASK_NAME"; echo "$JOB_SECURE_PARAMS"; '
        "echo '[saveJobStorage] {\"n\": 1}'; exit 3"
    )
    ctx = context(script)
    outcome = kubernetes(ctx)
    assert isinstance(outcome, Failed), outcome
    assert outcome.output["exit_code"] == 3
    lines = [entry.line for entry in ctx.logs.drain()]
    assert "hello from real" in lines
    assert '{"pw": "***"}' in lines  # the Secret reached the container, masked in the log
    assert ctx.saved_storage == {"n": 1}
    assert pod_is_gone(core, ctx)


def test_a_cancel_deletes_the_running_pod(core: Any) -> None:
    from workers.builtin.kubernetes import kubernetes  # noqa: PLC0415

    ctx = context("echo started; sleep 3600")
    outcomes: list[Any] = []
    thread = threading.Thread(target=lambda: outcomes.append(kubernetes(ctx)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    seen: list[str] = []
    while "started" not in seen:
        assert time.monotonic() < deadline, f"the pod never started; log: {seen}"
        seen += [entry.line for entry in ctx.logs.drain()]
        time.sleep(0.5)
    ctx.cancel()
    thread.join(120)
    assert not thread.is_alive()
    assert outcomes[0].message.startswith("canceled: pod ")
    assert pod_is_gone(core, ctx)
