"""The ``kubernetes`` processor against a local stand-in of the Kubernetes API.

The real ``kubernetes`` client talks HTTP to :mod:`tests.integration.workers.kube_standin`,
which moves each pod along a script of phases. What is checked: the calls made (Secret,
pod, owner, log, deletes), the outcome and exit code for each way a pod ends, the log
and job storage collected, a cancel and a timeout deleting the pod, a redelivered
attempt following the pod already there. ``test_kubernetes_cluster.py`` does it for real
when ``KUBECONFIG`` names a cluster.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import redis
from kubernetes.client import ApiClient, Configuration, CoreV1Api

from common.domain.builtin_params import PodParams
from common.messaging.publisher import Publisher
from tests.integration.workers.conftest import MakeDispatch, ResultInbox
from tests.integration.workers.kube_standin import FakeCluster, Step, stand_in
from workers.builtin.kubernetes import kubernetes
from workers.builtin.podapi import PodApi
from workers.builtin.podrunner import PodRunner, PodTimings
from workers.builtin.podspec import build_pod, pod_name
from workers.context import TaskContext
from workers.executor import Executor
from workers.outcomes import Completed, Failed, Outcome, Rejected
from workers.registry import Registry

NS = "jobs"
SECRET = "hunter2-secret"
TIMINGS = PodTimings(
    poll_interval=timedelta(milliseconds=50),
    delete_grace=timedelta(seconds=7),
    log_drain=timedelta(seconds=2),
)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with stand_in() as fake:
        yield fake


@pytest.fixture
def runner(cluster: FakeCluster) -> Iterator[PodRunner]:
    with ApiClient(Configuration(host=cluster.url)) as client:
        yield PodRunner(PodApi(CoreV1Api(client)), NS, TIMINGS)


def context(image: str, **fields: Any) -> TaskContext:
    values: dict[str, Any] = {
        "job_id": UUID(int=1),
        "run_id": UUID(int=2),
        "task_run_id": UUID(int=3),
        "tenant": "acme",
        "task": "dump",
        "job_secure_params": {"pw": SECRET},
        "params": {"image": image, "command": ["run"]},
    }
    values.update(fields)
    return TaskContext(**values)


def log_lines(ctx: TaskContext) -> list[str]:
    return [entry.line for entry in ctx.logs.drain()]


def calls(cluster: FakeCluster) -> list[str]:
    """``METHOD kind[/log]`` for each request, without names."""
    shortened = []
    for method, path in cluster.requests:
        parts = path.split("/")[5:]  # after /api/v1/namespaces/<ns>/
        kind = parts[0] + ("/log" if parts[-1] == "log" else "")
        shortened.append(f"{method} {kind}")
    return shortened


def test_a_pod_that_succeeds_completes_with_its_log_and_storage(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script(
        "ok",
        Step("Pending", waiting="ContainerCreating"),
        Step("Running", lines=("hello", f"secret is {SECRET}")),
        Step("Running", lines=('[saveJobStorage] {"cursor": 42}',)),
        Step("Succeeded", exit_code=0, reason="Completed", lines=("bye",)),
    )
    ctx = context("ok")
    name = pod_name(ctx.idempotency_key)
    assert runner.run(ctx) == Completed({"pod": name, "namespace": NS, "exit_code": 0})
    lines = log_lines(ctx)
    assert [line for line in lines if not line.startswith("[stellwerk]")] == [
        "hello", "secret is ***", '[saveJobStorage] {"cursor": 42}', "bye",
    ]
    assert f"[stellwerk] pod {NS}/{name} created (ok)" in lines
    assert "[stellwerk] pod pending: ContainerCreating: ContainerCreating (stand-in)" in lines
    assert ctx.saved_storage == {"cursor": 42}
    assert cluster.live_pods() == [] and cluster.secrets == {}
    order = calls(cluster)
    assert order[:3] == ["POST secrets", "POST pods", "PATCH secrets"]
    assert "GET pods/log" in order
    assert order[-2:] == ["DELETE pods", "DELETE secrets"]


def test_the_secret_is_owned_by_the_pod_and_no_secure_value_is_in_the_pod(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script("ok", Step("Succeeded", exit_code=0))
    cluster.refuse[("DELETE", "secrets")] = 500  # keep it, to look at it afterwards
    ctx = context("ok")
    assert isinstance(runner.run(ctx), Completed)
    (secret,) = cluster.secrets.values()
    (pod,) = cluster.pods.values()
    assert secret["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod",
        "name": pod.manifest["metadata"]["name"], "uid": pod.manifest["metadata"]["uid"],
    }]
    assert json.loads(secret["stringData"]["JOB_SECURE_PARAMS"]) == {"pw": SECRET}
    assert SECRET not in json.dumps(pod.manifest)
    assert pod.manifest["spec"]["restartPolicy"] == "Never"
    assert "the cluster deletes it with its pod" in " ".join(log_lines(ctx))


def test_a_failing_pod_fails_with_its_exit_code(cluster: FakeCluster, runner: PodRunner) -> None:
    cluster.script(
        "bad", Step("Running", lines=("trying",)), Step("Failed", exit_code=3, reason="Error")
    )
    ctx = context("bad", job_secure_params={})
    output = {"pod": pod_name(ctx.idempotency_key), "namespace": NS, "exit_code": 3}
    assert runner.run(ctx) == Failed("exit code 3 (Error)", output)
    assert "trying" in log_lines(ctx)
    assert "POST secrets" not in calls(cluster)  # no secure params, no Secret
    assert cluster.live_pods() == []


def test_a_pod_that_ended_before_the_first_look_still_gives_its_log(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script("fast", Step("Pending"), Step("Succeeded", exit_code=0, lines=("done",)))
    ctx = context("fast")
    assert isinstance(runner.run(ctx), Completed)
    assert "done" in log_lines(ctx)


def test_an_image_that_can_never_start_fails_at_once(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script("Bad Image", Step("Pending", waiting="InvalidImageName"))
    ctx = context("Bad Image")
    outcome = runner.run(ctx)
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("pod cannot start: InvalidImageName")
    assert cluster.live_pods() == []


def test_a_cancel_deletes_the_running_pod(cluster: FakeCluster, runner: PodRunner) -> None:
    cluster.script("forever", Step("Running", lines=("working",)))
    ctx = context("forever")
    following = lambda: "GET pods/log" in calls(cluster)  # noqa: E731
    outcome = run_in_thread(cluster, runner, ctx, until=following, then=ctx.cancel)
    name = pod_name(ctx.idempotency_key)
    assert outcome == Failed(f"canceled: pod {name} deleted", {"pod": name, "namespace": NS})
    (pod,) = cluster.pods.values()
    assert pod.deleted and pod.grace_s == 7
    assert cluster.secrets == {}
    assert "working" in log_lines(ctx)


def test_a_redelivered_attempt_follows_the_pod_already_there(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script("ok", Step("Running", lines=("first delivery",)), Step("Succeeded", exit_code=0))
    ctx = context("ok")
    existing = build_pod(ctx, PodParams(image="ok"), pod_name(ctx.idempotency_key), NS)
    cluster.add_pod(existing)
    assert isinstance(runner.run(ctx), Completed)
    assert len(cluster.pods) == 1
    lines = log_lines(ctx)
    assert "first delivery" in lines
    assert any("exists already: following it" in line for line in lines)


def test_a_later_attempt_deletes_the_pods_of_earlier_ones(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script("ok", Step("Running"), Step("Succeeded", exit_code=0))
    first = context("ok", attempt=1)
    cluster.add_pod(build_pod(first, PodParams(image="ok"), pod_name(first.idempotency_key), NS))
    second = context("ok", attempt=2)
    assert isinstance(runner.run(second), Completed)
    assert all(pod.deleted for pod in cluster.pods.values())
    assert ("DELETE", f"/api/v1/namespaces/{NS}/pods") in cluster.requests


def test_refused_creation_is_a_rejection_and_leaves_nothing(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.refuse[("POST", "pods")] = 403
    ctx = context("ok")
    outcome = runner.run(ctx)
    assert isinstance(outcome, Rejected)
    assert "HTTP 403" in outcome.message and "refused (stand-in)" in outcome.message
    assert cluster.secrets == {}


def test_bad_params_are_rejected_before_any_call(cluster: FakeCluster, runner: PodRunner) -> None:
    outcome = runner.run(context("ok", params={"image": "x", "namespace": "No_Such"}))
    assert isinstance(outcome, Rejected)
    assert "params.namespace" in outcome.message
    assert cluster.requests == []


def test_a_pod_deleted_by_someone_else_fails_the_attempt(
    cluster: FakeCluster, runner: PodRunner
) -> None:
    cluster.script("forever", Step("Running"))
    ctx = context("forever")

    def delete_it() -> None:
        with cluster.changed:
            for pod in cluster.pods.values():
                pod.deleted = True

    outcome = run_in_thread(cluster, runner, ctx, until=lambda: bool(cluster.pods), then=delete_it)
    assert isinstance(outcome, Failed)
    assert "deleted by someone else" in outcome.message


def test_the_registered_processor_reads_kubeconfig_and_the_default_namespace(
    cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "standin",
        "clusters": [{"name": "standin", "cluster": {"server": cluster.url}}],
        "users": [{"name": "me", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "me"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("STELLWERK_KUBERNETES_NAMESPACE", "from-env")
    monkeypatch.setenv("STELLWERK_KUBERNETES_POLL_INTERVAL_S", "0.05")
    cluster.script("ok", Step("Running", lines=("hi",)), Step("Succeeded", exit_code=0))
    ctx = context("ok")
    outcome = kubernetes(ctx)
    assert outcome == Completed(
        {"pod": pod_name(ctx.idempotency_key), "namespace": "from-env", "exit_code": 0}
    )
    assert {ns for ns, _ in cluster.pods} == {"from-env"}


def test_without_a_cluster_the_registered_processor_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    outcome = kubernetes(context("ok"))
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("no Kubernetes cluster configured on this worker")


def test_a_timeout_deletes_the_pod_and_reports_timeout(
    cluster: FakeCluster, worker_redis_url: str, inbox: ResultInbox,
    make_dispatch: MakeDispatch,
) -> None:
    """Through the real executor: its heartbeat raises the flag at the deadline."""
    cluster.script("forever", Step("Running", lines=("still going",)))
    with ApiClient(Configuration(host=cluster.url)) as client:
        registry = Registry()
        registry.register("kubernetes", PodRunner(PodApi(CoreV1Api(client)), NS, TIMINGS).run)
        worker_redis = redis.Redis.from_url(worker_redis_url)
        executor = Executor(
            registry, worker_redis, Publisher(worker_redis), heartbeat_interval=timedelta(seconds=1)
        )
        dispatch = make_dispatch("kubernetes", params={"image": "forever"}, timeout_s=0.5)
        executor.handle(dispatch.model_dump(mode="json"), worker="w1")
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "TIMEOUT"
    assert result.output == {"pod": pod_name(dispatch.idempotency_key), "namespace": NS}
    (pod,) = cluster.pods.values()
    assert pod.deleted
    # Earlier lines went out with the progress messages.
    lines = [line.line for message in inbox.for_attempt(dispatch) for line in message.logs]
    assert "still going" in lines
    assert any("timeout of 0.5 s reached" in line for line in lines)


def run_in_thread(
    cluster: FakeCluster,
    runner: PodRunner,
    ctx: TaskContext,
    until: Callable[[], bool],
    then: Callable[[], None],
) -> Outcome:
    """Run the processor on a thread; once the stand-in saw ``until()``, ``then()``."""
    outcomes: list[Outcome] = []
    thread = threading.Thread(target=lambda: outcomes.append(runner.run(ctx)), daemon=True)
    thread.start()
    cluster.wait_for(until)
    then()
    thread.join(20.0)
    assert not thread.is_alive(), "the processor did not return"
    return outcomes[0]
