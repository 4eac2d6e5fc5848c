"""``stellwerk up`` serves ``kubernetes`` only where a cluster is configured."""

from pathlib import Path

import pytest

from scheduler.cli.up import UpOptions, plan_children, worker_types

OPTIONS = UpOptions(host="127.0.0.1", port=8181, data_dir=Path("/data/sw"), concurrency=4)


def worker_argv(env: dict[str, str]) -> tuple[str, ...]:
    (worker,) = [child for child in plan_children("/py", env, OPTIONS) if child.name == "worker"]
    return worker.argv


def test_without_a_cluster_the_worker_does_not_claim_the_kubernetes_type() -> None:
    assert "kubernetes" not in worker_types({"PATH": "/bin", "KUBECONFIG": ""}).split(",")
    argv = worker_argv({"PATH": "/bin"})
    types = argv[argv.index("--types") + 1]
    assert types.split(",") == ["noop", "sleep", "python", "shell"]


@pytest.mark.parametrize(
    "env", [{"KUBECONFIG": "/home/me/.kube/config"}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}]
)
def test_with_a_cluster_the_worker_serves_kubernetes_too(env: dict[str, str]) -> None:
    argv = worker_argv(env)
    assert argv[argv.index("--types") + 1].split(",")[-1] == "kubernetes"
