"""Running one attempt as a pod: create it, follow its phase and log, delete it.

The steps, each an API call of :class:`~workers.builtin.podapi.PodApi`:

1. delete pods left by earlier attempts of the same task run (their worker was lost;
   the engine has moved on to this attempt);
2. create the Secret with the secure params (if any), then the pod (a pod of that name
   already there is this attempt redelivered: it is followed, not started again), then
   make the Secret owned by the pod, so the cluster deletes it with the pod;
3. read the pod every poll interval until it has ended, following its log from the
   moment its container has started; the cancel flag (a cancel, or the timeout) wakes
   the wait at once and deletes the pod;
4. delete the pod and the Secret, whatever happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from common.domain.builtin_params import PodParams
from workers.builtin.podapi import NOT_FOUND, PodApi, PodApiError
from workers.builtin.podlog import LogFollower
from workers.builtin.podspec import (
    ATTEMPT_LABEL,
    DEADLINE_MARGIN_S,
    TASK_RUN_LABEL,
    build_pod,
    build_secret,
    has_secrets,
    owner_patch,
    pod_name,
)
from workers.builtin.podstatus import PodView, pod_outcome, view_pod
from workers.context import TaskContext
from workers.outcomes import Completed, Failed, Rejected

# Refusals that another attempt would meet again: bad manifest, no permission.
REJECTING_STATUSES = frozenset({400, 401, 403, 422})


@dataclass(frozen=True)
class PodTimings:
    """How often the pod is read, and how long stopping it may take."""

    poll_interval: timedelta = timedelta(seconds=1)
    # The container's SIGTERM → SIGKILL grace on a cancel or timeout.
    delete_grace: timedelta = timedelta(seconds=5)
    # How long the log may take to end after the pod has.
    log_drain: timedelta = timedelta(seconds=5)


@dataclass
class PodHandle:
    """The attempt's pod: where it is, and whether it is deleted already."""

    namespace: str
    name: str
    deleted: bool = False
    output: dict[str, Any] = field(default_factory=dict)


class PodRunner:
    """The ``kubernetes`` processor, given an API and the namespace to default to."""

    def __init__(
        self, api: PodApi, default_namespace: str, timings: PodTimings | None = None
    ) -> None:
        self._api = api
        self._namespace = default_namespace
        self._timings = timings or PodTimings()

    def run(self, ctx: TaskContext) -> Completed | Failed | Rejected:
        """Run the attempt's pod to its end (or until cancelled); exit code 0 is success."""
        try:
            params = PodParams.model_validate(ctx.params)
        except ValidationError as exc:
            return Rejected(_describe(exc))
        name = pod_name(ctx.idempotency_key)
        pod = PodHandle(params.namespace or self._namespace, name)
        pod.output = {"pod": name, "namespace": pod.namespace}
        try:
            return self._run(ctx, params, pod)
        except PodApiError as error:
            if error.status in REJECTING_STATUSES:
                return Rejected(str(error))
            return Failed(str(error), pod.output)
        finally:
            self._clean_up(ctx, pod)

    def _run(self, ctx: TaskContext, params: PodParams, pod: PodHandle) -> Completed | Failed:
        self._delete_earlier_attempts(ctx, pod.namespace)
        if has_secrets(ctx):
            self._api.create_secret(build_secret(ctx, pod.name, pod.namespace))
        manifest = build_pod(ctx, params, pod.name, pod.namespace)
        current, created = self._api.create_pod(manifest)
        if created:
            ctx.log(f"[stellwerk] pod {pod.namespace}/{pod.name} created ({params.image})")
        else:
            ctx.log(f"[stellwerk] pod {pod.namespace}/{pod.name} exists already: following it")
        if has_secrets(ctx):
            self._api.own_secret(pod.namespace, pod.name, owner_patch(current))
        quiet_for = timedelta(seconds=ctx.timeout_s + DEADLINE_MARGIN_S)
        follower = LogFollower(
            ctx, lambda: self._api.follow_log(pod.namespace, pod.name, quiet_for)
        )
        try:
            return self._follow(ctx, pod, current, follower)
        finally:
            follower.close()

    def _follow(
        self, ctx: TaskContext, pod: PodHandle, current: dict[str, Any], follower: LogFollower
    ) -> Completed | Failed:
        """Watch the pod until it ends, cannot start, or the attempt is cancelled."""
        said = ""
        while True:
            view = view_pod(current)
            said = _say_why_waiting(ctx, view, said)
            if view.hopeless:
                return Failed(f"pod cannot start: {view.reason}", pod.output)
            if view.started:
                follower.start()
            if view.finished:
                follower.finish(self._timings.log_drain)
                return pod_outcome(view, pod.output)
            if ctx.wait_cancelled(self._timings.poll_interval.total_seconds()):
                return self._stop(ctx, pod, follower)
            current = self._read(ctx, pod, current)

    def _read(self, ctx: TaskContext, pod: PodHandle, last: dict[str, Any]) -> dict[str, Any]:
        """The pod now; on a passing failure the last look (the next poll tries again)."""
        try:
            return self._api.read_pod(pod.namespace, pod.name)
        except PodApiError as error:
            if error.status == NOT_FOUND:
                pod.deleted = True
                raise PodApiError("read pod", None, "the pod was deleted by someone else") from None
            ctx.log(f"[stellwerk] {error} (trying again)")
            return last

    def _stop(self, ctx: TaskContext, pod: PodHandle, follower: LogFollower) -> Failed:
        """Cancel or timeout: delete the pod, keep what it logged until it stopped."""
        grace = self._timings.delete_grace
        ctx.log(f"[stellwerk] stopping: deleting pod {pod.name} ({grace.total_seconds():g} s)")
        self._delete_pod(ctx, pod)
        follower.finish(grace + self._timings.log_drain)
        return Failed(f"canceled: pod {pod.name} deleted", pod.output)

    def _delete_earlier_attempts(self, ctx: TaskContext, namespace: str) -> None:
        if ctx.attempt <= 1:
            return
        selector = f"{TASK_RUN_LABEL}={ctx.task_run_id},{ATTEMPT_LABEL}!={ctx.attempt}"
        try:
            self._api.delete_pods(namespace, selector)
        except PodApiError as error:
            ctx.log(f"[stellwerk] earlier attempts' pods left alone: {error}")

    def _clean_up(self, ctx: TaskContext, pod: PodHandle) -> None:
        """Delete the pod and its Secret; a failure here leaves the outcome as it is."""
        if not pod.deleted:
            self._delete_pod(ctx, pod)
        if has_secrets(ctx):
            try:
                self._api.delete_secret(pod.namespace, pod.name)
            except PodApiError as error:
                ctx.log(f"[stellwerk] {error} (the cluster deletes it with its pod)")

    def _delete_pod(self, ctx: TaskContext, pod: PodHandle) -> None:
        try:
            self._api.delete_pod(pod.namespace, pod.name, self._timings.delete_grace)
            pod.deleted = True
        except PodApiError as error:
            ctx.log(f"[stellwerk] {error}")


def _say_why_waiting(ctx: TaskContext, view: PodView, said: str) -> str:
    """Log why the pod is not running yet, once per reason; the reason now logged."""
    if view.started or not view.reason or view.reason == said:
        return said
    ctx.log(f"[stellwerk] pod {view.phase.lower()}: {view.reason}")
    return view.reason


def _describe(error: ValidationError) -> str:
    problems = [
        f"params.{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
        for item in error.errors()
    ]
    return "invalid kubernetes params: " + "; ".join(problems)
