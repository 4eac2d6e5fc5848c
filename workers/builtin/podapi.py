"""The few Kubernetes API calls the ``kubernetes`` processor makes, in JSON, on the official client.

Pods and Secrets go in and come out as the API's own JSON (``_preload_content=False``
and :func:`json.loads`), not as the client's generated models: the processor's pure
code then reads exactly what the API documents, and does not depend on how a given
release of the client models it. Every failure, HTTP or network, becomes a
:class:`PodApiError` with the HTTP status when there is one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, Protocol, TypeVar

import urllib3
from kubernetes.client import CoreV1Api, V1Pod, V1Secret
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")
CONFLICT = 409
NOT_FOUND = 404
# A longer log line is passed on in pieces; it bounds what one line without a newline
# can take of the worker's memory.
MAX_LINE_BYTES = 1024 * 1024
READ_BYTES = 64 * 1024


class PodApiError(Exception):
    """An API call failed: ``status`` is its HTTP status, None for a network failure."""

    def __init__(self, action: str, status: int | None, detail: str) -> None:
        super().__init__(f"{action}: {f'HTTP {status} ' if status else ''}{detail}".strip())
        self.status = status


class RawResponse(Protocol):
    """What the client returns with ``_preload_content=False`` (a urllib3 response)."""

    data: bytes

    def stream(self, amt: int) -> Iterator[bytes]:
        """The body in pieces as they arrive."""

    def release_conn(self) -> None:
        """Hand the connection back to the pool."""

    def close(self) -> None:
        """Close the connection (also ends a read blocked on it)."""


class PodApi:
    """Create, read, follow and delete one namespace's task pods and their Secrets."""

    def __init__(self, core: CoreV1Api, request_timeout: timedelta = timedelta(seconds=30)) -> None:
        self._core = core
        self._timeout_s = request_timeout.total_seconds()

    def create_secret(self, manifest: dict[str, Any]) -> None:
        """Create a Secret; one of that name already there (a redelivery) is taken as is."""
        namespace = manifest["metadata"]["namespace"]
        try:
            self._json("create secret", lambda: self._core.create_namespaced_secret(
                namespace, V1Secret.model_validate(manifest),
                _preload_content=False, _request_timeout=self._timeout_s,
            ))
        except PodApiError as error:
            if error.status != CONFLICT:
                raise

    def own_secret(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Apply a merge patch (its owner reference) to a Secret."""
        self._json("set the secret's owner", lambda: self._core.patch_namespaced_secret(
            name, namespace, patch, _content_type="application/merge-patch+json",
            _preload_content=False, _request_timeout=self._timeout_s,
        ))

    def create_pod(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The pod and whether this call created it; an existing one (a redelivery) is read."""
        metadata = manifest["metadata"]
        try:
            return self._json("create pod", lambda: self._core.create_namespaced_pod(
                metadata["namespace"], V1Pod.model_validate(manifest),
                _preload_content=False, _request_timeout=self._timeout_s,
            )), True
        except PodApiError as error:
            if error.status != CONFLICT:
                raise
        return self.read_pod(metadata["namespace"], metadata["name"]), False

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod as the API shows it now."""
        return self._json("read pod", lambda: self._core.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=self._timeout_s
        ))

    def follow_log(self, namespace: str, name: str, quiet_for: timedelta) -> LogLines:
        """The container's log from its start, following it until the container ends.

        ``quiet_for`` is how long the container may print nothing (the read timeout):
        as long as the attempt may take, since a quiet container is no broken stream.
        """
        timeouts = (self._timeout_s, max(quiet_for.total_seconds(), self._timeout_s))
        response: RawResponse = _calling("read the log", lambda: self._core.read_namespaced_pod_log(
            name, namespace, follow=True, _preload_content=False, _request_timeout=timeouts
        ))
        return LogLines(response)

    def delete_pod(self, namespace: str, name: str, grace: timedelta) -> None:
        """Delete a pod (SIGTERM, then SIGKILL after ``grace``); a missing one is fine."""
        self._delete("delete pod", lambda: self._core.delete_namespaced_pod(
            name, namespace, grace_period_seconds=int(grace.total_seconds()),
            _preload_content=False, _request_timeout=self._timeout_s,
        ))

    def delete_secret(self, namespace: str, name: str) -> None:
        """Delete a Secret; a missing one (already collected with its pod) is fine."""
        self._delete("delete secret", lambda: self._core.delete_namespaced_secret(
            name, namespace, _preload_content=False, _request_timeout=self._timeout_s
        ))

    def delete_pods(self, namespace: str, label_selector: str) -> None:
        """Delete every pod the selector matches."""
        self._json("delete earlier pods", lambda: self._core.delete_collection_namespaced_pod(
            namespace, label_selector=label_selector,
            _preload_content=False, _request_timeout=self._timeout_s,
        ))

    def _delete(self, action: str, call: Callable[[], object]) -> None:
        try:
            self._json(action, call)
        except PodApiError as error:
            if error.status != NOT_FOUND:
                raise

    @staticmethod
    def _json(action: str, call: Callable[[], object]) -> dict[str, Any]:
        response: RawResponse = _calling(action, call)
        try:
            value = json.loads(response.data or b"{}")
        except ValueError as exc:
            raise PodApiError(action, None, f"answer is not JSON: {exc}") from None
        finally:
            response.release_conn()
        return value if isinstance(value, dict) else {}


class LogLines:
    """A followed log, line by line; :meth:`close` ends it from another thread."""

    def __init__(self, response: RawResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[str]:
        """Each line without its newline; the last one even without a newline."""
        pending = b""
        for chunk in self._response.stream(READ_BYTES):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield _text(line)
            while len(pending) >= MAX_LINE_BYTES:
                yield _text(pending[:MAX_LINE_BYTES])
                pending = pending[MAX_LINE_BYTES:]
        if pending:
            yield _text(pending)

    def close(self) -> None:
        """Stop following (the container may outlive our interest in it)."""
        self._response.close()


def _calling(action: str, call: Callable[[], Any]) -> Any:
    """``call()``; its HTTP or network failure as a :class:`PodApiError`."""
    try:
        return call()
    except ApiException as exc:
        raise PodApiError(action, exc.status, _reason(exc)) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise PodApiError(action, None, str(exc)) from None


def _reason(exc: ApiException) -> str:
    """The message of the API's ``Status`` object, else the HTTP reason."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or exc.reason or "")


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r")
