"""Where the ``kubernetes`` processor finds its cluster, and its own settings.

The cluster is the one ``kubectl`` would use: the file(s) in ``KUBECONFIG`` when set,
else the pod's service account when the worker runs inside a cluster, else
``~/.kube/config``; all read with the official client's loaders, into a configuration
of this call's own (the client's global default is left alone).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta

from kubernetes import config
from kubernetes.client import ApiClient, Configuration
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.domain.builtin_params import DNS_LABEL
from workers.builtin.podrunner import PodTimings

IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"


class KubernetesSettings(BaseSettings):
    """``STELLWERK_KUBERNETES_*``: the default namespace and the processor's timings."""

    model_config = SettingsConfigDict(env_prefix="STELLWERK_KUBERNETES_", extra="ignore")

    # Used when a task's params name no namespace.
    namespace: str = Field(default="default", pattern=DNS_LABEL)
    poll_interval_s: float = Field(default=1.0, gt=0)
    delete_grace_s: float = Field(default=5.0, ge=0)
    log_drain_s: float = Field(default=5.0, ge=0)

    @property
    def timings(self) -> PodTimings:
        """The durations as the runner takes them."""
        return PodTimings(
            poll_interval=timedelta(seconds=self.poll_interval_s),
            delete_grace=timedelta(seconds=self.delete_grace_s),
            log_drain=timedelta(seconds=self.log_drain_s),
        )


def api_client(environ: Mapping[str, str] | None = None) -> ApiClient:
    """A client for the configured cluster; ``ConfigException`` when there is none."""
    environ = os.environ if environ is None else environ
    configuration = Configuration()
    if not environ.get("KUBECONFIG") and environ.get(IN_CLUSTER_VARIABLE):
        # The loaders have no annotations (the generated client has).
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
    else:
        # Read here, not the client's copy taken when it was first imported.
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=environ.get("KUBECONFIG") or None,
            client_configuration=configuration,
            persist_config=False,
        )
    return ApiClient(configuration)
