"""What a pod's status means for its task: pure reading of the API's JSON.

A pod goes ``Pending`` → ``Running`` → ``Succeeded`` | ``Failed`` (``restartPolicy:
Never``: it never runs twice). Its log can be read once its container has started,
so from ``Running`` on, or right away for a pod that finished between two looks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.builtin.podspec import CONTAINER
from workers.outcomes import Completed, Failed

FINISHED_PHASES = ("Succeeded", "Failed")
STARTED_PHASES = ("Running", *FINISHED_PHASES)
# Waiting reasons that no retry of the kubelet will cure. An image that cannot be pulled
# right now (ErrImagePull, ImagePullBackOff) may be pullable in a minute: those wait
# for the task's timeout, with the reason in the task log.
HOPELESS_WAITING = frozenset({"InvalidImageName", "ErrImageNeverPull"})


@dataclass(frozen=True)
class PodView:
    """The few facts of a pod's status that the processor acts on."""

    phase: str
    exit_code: int | None = None
    # Why it is waiting, or why it ended: "ImagePullBackOff: ...", "OOMKilled", ...
    reason: str = ""

    @property
    def started(self) -> bool:
        """Whether its container has run, so that its log can be read."""
        return self.phase in STARTED_PHASES

    @property
    def finished(self) -> bool:
        """Whether it has ended for good."""
        return self.phase in FINISHED_PHASES

    @property
    def hopeless(self) -> bool:
        """Whether it waits for something that will never come (a malformed image name)."""
        return self.reason.split(":", 1)[0] in HOPELESS_WAITING


def view_pod(pod: Mapping[str, Any]) -> PodView:
    """The :class:`PodView` of a pod as the API returns it."""
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    state = _container_state(status)
    terminated = state.get("terminated")
    if terminated is not None:
        code = terminated.get("exitCode")
        reason = _describe(terminated) or _describe(status)
        return PodView(phase, int(code) if code is not None else None, reason)
    waiting = state.get("waiting")
    if waiting is not None:
        return PodView(phase, None, _describe(waiting))
    return PodView(phase, None, _describe(status))


def pod_outcome(view: PodView, output: dict[str, Any]) -> Completed | Failed:
    """The outcome of a finished pod: ``Succeeded`` is success, anything else failure."""
    result = {**output, "exit_code": view.exit_code}
    if view.phase == "Succeeded":
        return Completed(result)
    if view.exit_code is None:
        return Failed(f"pod {view.phase.lower()}: {view.reason or 'no reason given'}", result)
    suffix = f" ({view.reason})" if view.reason else ""
    return Failed(f"exit code {view.exit_code}{suffix}", result)


def _container_state(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for container in status.get("containerStatuses") or ():
        if container.get("name") == CONTAINER:
            return container.get("state") or {}
    return {}


def _describe(part: Mapping[str, Any]) -> str:
    """``"Reason: message"``, ``"Reason"`` or ``""``."""
    reason, message = part.get("reason") or "", part.get("message") or ""
    if reason and message:
        return f"{reason}: {message}"
    return str(reason or message)
