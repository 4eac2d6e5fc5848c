"""A local HTTP stand-in for the few Kubernetes API calls the ``kubernetes`` processor makes.

Not a cluster: pods run no containers. Each pod follows a script of :class:`Step` s
chosen by its image, one step further on every read of the pod (the last step stays),
as a kubelet would move it along between two looks. The JSON is shaped like the real
API's (``Pod``, ``Secret``, ``Status`` objects, a chunked, followed log), so the real
``kubernetes`` client talks to it unchanged, pointed at it with ``Configuration(host=...)``.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

NAMESPACED = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pods|secrets)(?:/(?P<name>[^/]+))?(?P<log>/log)?$"
)


@dataclass(frozen=True)
class Step:
    """One look at a pod: its phase, its container's state, and lines it logs by then."""

    phase: str
    waiting: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    lines: tuple[str, ...] = ()

    def status(self) -> dict[str, Any]:
        if self.exit_code is not None:
            state: dict[str, Any] = {"terminated": {"exitCode": self.exit_code}}
            if self.reason:
                state["terminated"]["reason"] = self.reason
        elif self.waiting is not None:
            state = {"waiting": {"reason": self.waiting, "message": f"{self.waiting} (stand-in)"}}
        elif self.phase == "Running":
            state = {"running": {"startedAt": "2024-01-01T00:00:00Z"}}
        else:
            state = {}
        status: dict[str, Any] = {"phase": self.phase}
        if state:
            status["containerStatuses"] = [{"name": "task", "state": state}]
        if self.reason and self.exit_code is None:
            status["reason"] = self.reason
        return status


@dataclass
class FakePod:
    """A pod as stored: its manifest, where it is in its script, and its log so far."""

    manifest: dict[str, Any]
    script: list[Step]
    position: int = -1
    log: list[str] = field(default_factory=list)
    deleted: bool = False
    grace_s: int | None = None

    def advance(self) -> None:
        if self.position + 1 < len(self.script):
            self.position += 1
            self.log.extend(self.script[self.position].lines)

    @property
    def ended(self) -> bool:
        """Whether its container has stopped: nothing more will be logged."""
        return self.deleted or self.step.exit_code is not None

    @property
    def step(self) -> Step:
        return self.script[max(self.position, 0)]

    def json(self) -> dict[str, Any]:
        return {**self.manifest, "status": self.step.status()}


class FakeCluster:
    """What the stand-in holds, and what the tests look at afterwards."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.scripts: dict[str, list[Step]] = {}
        self.pods: dict[tuple[str, str], FakePod] = {}
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[dict[str, Any]] = []
        # Status codes to answer instead, by (method, kind): ("POST", "pods") → 403.
        self.refuse: dict[tuple[str, str], int] = {}
        self.url = ""

    def script(self, image: str, *steps: Step) -> None:
        self.scripts[image] = list(steps)

    def add_pod(self, manifest: dict[str, Any]) -> FakePod:
        """Store a pod (created by the processor or, in a test, beforehand)."""
        metadata = manifest.setdefault("metadata", {})
        metadata["uid"] = str(uuid.uuid4())
        image = manifest["spec"]["containers"][0]["image"]
        pod = FakePod(manifest, self.scripts.get(image, [Step("Pending")]))
        pod.advance()
        self.pods[metadata["namespace"], metadata["name"]] = pod
        return pod

    def live_pods(self) -> list[FakePod]:
        return [pod for pod in self.pods.values() if not pod.deleted]

    def wait_for(self, predicate: Any, timeout_s: float = 10.0) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout_s), "the stand-in never got there"


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    failure = "Success" if code < 300 else "Failure"
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": failure,
        "message": message, "reason": reason, "code": code,
    }


class Handler(BaseHTTPRequestHandler):
    """Routes the API paths the processor uses; anything else is a 404 ``Status``."""

    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    @property
    def cluster(self) -> FakeCluster:
        return self.server.cluster

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        match = NAMESPACED.match(url.path)
        body = self._body()
        if match is None:
            self._send(404, status_body(404, "NotFound", f"no route {url.path}"))
            return
        ns, kind, name = match["ns"], match["kind"], match["name"]
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        with self.cluster.changed:
            self.cluster.requests.append((method, url.path))
            if body:
                self.cluster.bodies.append(body)
            refused = self.cluster.refuse.get((method, kind))
        if refused:
            self._send(refused, status_body(refused, "Forbidden", f"{kind} refused (stand-in)"))
        elif match["log"]:
            self._follow_log(ns, name, query)
        else:
            handler = getattr(self, f"_{method.lower()}_{kind}")
            self._send(*handler(ns, name, body, query))
        with self.cluster.changed:
            self.cluster.changed.notify_all()

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # --- pods -------------------------------------------------------------------------

    def _post_pods(self, ns: str, _name: str, body: dict[str, Any], _q: Any) -> tuple[int, Any]:
        name = body["metadata"]["name"]
        with self.cluster.changed:
            if (ns, name) in self.cluster.pods and not self.cluster.pods[ns, name].deleted:
                return 409, status_body(409, "AlreadyExists", f'pods "{name}" already exists')
            pod = self.cluster.add_pod(body)
            return 201, pod.json()

    def _get_pods(self, ns: str, name: str, _body: Any, _q: Any) -> tuple[int, Any]:
        with self.cluster.changed:
            pod = self.cluster.pods.get((ns, name))
            if pod is None or pod.deleted:
                return 404, status_body(404, "NotFound", f'pods "{name}" not found')
            pod.advance()
            return 200, pod.json()

    def _delete_pods(self, ns: str, name: str | None, _body: Any, query: dict[str, str]) -> Any:
        with self.cluster.changed:
            if name is None:
                return 200, self._delete_collection(ns, query.get("labelSelector", ""))
            pod = self.cluster.pods.get((ns, name))
            if pod is None or pod.deleted:
                return 404, status_body(404, "NotFound", f'pods "{name}" not found')
            pod.deleted = True
            grace = query.get("gracePeriodSeconds")
            pod.grace_s = int(grace) if grace is not None else None
            return 200, pod.json()

    def _delete_collection(self, ns: str, selector: str) -> dict[str, Any]:
        """Only the ``key=value`` and ``key!=value`` terms the processor sends."""
        deleted = []
        for (pod_ns, _), pod in self.cluster.pods.items():
            labels = pod.manifest["metadata"].get("labels", {})
            if pod_ns == ns and not pod.deleted and _selects(selector, labels):
                pod.deleted = True
                deleted.append(pod.json())
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": deleted}

    def _follow_log(self, ns: str, name: str, query: dict[str, str]) -> None:
        """Stream the log in chunks; with ``follow``, until the pod ends or is deleted."""
        pod = self.cluster.pods.get((ns, name))
        if pod is None or pod.deleted:
            self._send(404, status_body(404, "NotFound", f'pods "{name}" not found'))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        while True:
            with self.cluster.changed:

                def more(seen: int = sent) -> bool:
                    return len(pod.log) > seen or pod.ended

                self.cluster.changed.wait_for(more, timeout=0.1)
                lines, ended = pod.log[sent:], pod.ended
            sent += len(lines)
            if lines:
                self._chunk("".join(line + "\n" for line in lines).encode())
            if not lines and (ended or query.get("follow") != "true"):
                break
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # --- secrets ------------------------------------------------------------------------

    def _post_secrets(self, ns: str, _name: str, body: dict[str, Any], _q: Any) -> Any:
        name = body["metadata"]["name"]
        with self.cluster.changed:
            if (ns, name) in self.cluster.secrets:
                return 409, status_body(409, "AlreadyExists", f'secrets "{name}" already exists')
            body["metadata"]["uid"] = str(uuid.uuid4())
            self.cluster.secrets[ns, name] = body
            return 201, body

    def _patch_secrets(self, ns: str, name: str, body: dict[str, Any], _q: Any) -> Any:
        assert self.headers["Content-Type"] == "application/merge-patch+json"
        with self.cluster.changed:
            secret = self.cluster.secrets.get((ns, name))
            if secret is None:
                return 404, status_body(404, "NotFound", f'secrets "{name}" not found')
            secret["metadata"].update(body.get("metadata", {}))
            return 200, secret

    def _delete_secrets(self, ns: str, name: str, _body: Any, _q: Any) -> Any:
        with self.cluster.changed:
            if self.cluster.secrets.pop((ns, name), None) is None:
                return 404, status_body(404, "NotFound", f'secrets "{name}" not found')
            return 200, status_body(200, "", "deleted")


def _selects(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        else:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
    return True


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.cluster = cluster

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up on a followed log is no error worth a traceback."""


@contextmanager
def stand_in() -> Iterator[FakeCluster]:
    """A stand-in API server on a free local port, for the block's duration."""
    cluster = FakeCluster()
    server = StandInServer(cluster)
    cluster.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield cluster
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
