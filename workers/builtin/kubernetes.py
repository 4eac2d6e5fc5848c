"""``kubernetes`` (``image``, ``command``, ``namespace``, ``resources``, ``env``): one pod.

The image runs as a pod with the environment contract of ``shell`` (secure params
through a Secret, never in the pod spec); its log becomes the task log, its exit code
the output, and the pod is deleted at the end, on cancel and on timeout. The steps are
in :mod:`workers.builtin.podrunner`, the manifests in :mod:`workers.builtin.podspec`.

Registered with the other built-ins, but only a worker started with ``--types
kubernetes`` serves it: ``stellwerk up`` adds it when a cluster is configured
(``KUBECONFIG``, or running in a cluster), so ``GET /processors`` never shows the type
served by a worker that has no cluster to run it on.
"""

from __future__ import annotations

from workers.context import TaskContext
from workers.outcomes import Completed, Failed, Rejected
from workers.registry import processor


@processor("kubernetes")
def kubernetes(ctx: TaskContext) -> Completed | Failed | Rejected:
    """Run the task's image as a pod on the configured cluster, to its end."""
    # Imported here (hence the noqa): the client takes a fifth of a second to import,
    # which only the workers that run pods should pay.
    from kubernetes.client import CoreV1Api  # noqa: PLC0415
    from kubernetes.config import ConfigException  # noqa: PLC0415

    from workers.builtin.kubeconfig import KubernetesSettings, api_client  # noqa: PLC0415
    from workers.builtin.podapi import PodApi  # noqa: PLC0415
    from workers.builtin.podrunner import PodRunner  # noqa: PLC0415

    settings = KubernetesSettings()
    try:
        client = api_client()
    except ConfigException as exc:
        return Failed(f"no Kubernetes cluster configured on this worker: {exc}")
    with client:
        runner = PodRunner(PodApi(CoreV1Api(client)), settings.namespace, settings.timings)
        return runner.run(ctx)
