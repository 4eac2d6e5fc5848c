"""The chaos suite's load: jobs whose tasks record each execution, and a webhook receiver.

Every task is a ``shell`` task running ``sh -c RECORD``: it appends a ``start`` line
before its work and an ``end`` line after it to one file opened with O_APPEND (``>>``,
one short ``write`` per line, so lines of concurrent tasks never interleave). A line
names the run, task, attempt and idempotency key from the task's environment
(``workers/builtin/shellenv.py``), the process id and the time: an attempt executed twice
is the same (run, task, attempt) started twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

RECORD = (
    'echo "start $RUN_ID $TASK_NAME $ATTEMPT $IDEMPOTENCY_KEY $$ $(date +%s.%N)" >> "$CHAOS_LOG"; '
    'sleep "$CHAOS_SLEEP"; rc=0; [ "$ATTEMPT" -le "$CHAOS_FAIL_UNTIL" ] && rc=1; '
    'echo "end $RUN_ID $TASK_NAME $ATTEMPT $IDEMPOTENCY_KEY $$ $(date +%s.%N) $rc" '
    '>> "$CHAOS_LOG"; exit $rc'
)
# Flow control (issue 16): every DAG job's flaky task holds this key, so the load keeps it
# full; the checks hold the ACTIVE intervals to its limit and every slot to be released.
FLOW_KEY = "chaos-flaky"
FLOW_LIMIT = 2
# Every LANE_EVERY-th DAG job splits also into LANE_TASKS short tasks on a key of limit
# LANE_LIMIT, wide enough to be admitted in lanes (a slot's attempts run one after
# another, ``common.domain.flow.lanes``; a third of them sleep past the 200 ms after which
# a lane gives back what it has not begun): the checks hold their executions to it.
LANE_KEY = "chaos-lanes"
LANE_LIMIT = 8
LANE_TASKS = 24
LANE_EVERY = 4
LANE_PREFIX = "lane-"
CRON_PREFIX = "chaos-cron-"
DAG_PREFIX = "chaos-dag-"
STORM_PREFIX = "chaos-storm-"
WIDE_PREFIX = "chaos-wide-"


def shell_task(name: str, ctx: TaskContextSpec, *, sleep_s: float = 0.0, fail_until: int = 0,
               next_: list[str] | None = None, retries: int = 0) -> dict[str, Any]:
    """A task that records its execution, sleeps, and fails its first ``fail_until``
    attempts (``retries`` and a 1 s backoff bring it back)."""
    env = {"CHAOS_LOG": str(ctx.log), "CHAOS_SLEEP": f"{sleep_s:g}",
           "CHAOS_FAIL_UNTIL": str(fail_until)}
    task: dict[str, Any] = {
        "name": name, "type": "shell", "next": next_ or [],
        "params": {"argv": ["sh", "-c", RECORD, ctx.marker], "env": env},
    }
    if retries:
        task.update(retries=retries, retry_backoff=1)
    return task


@dataclass(frozen=True)
class TaskContextSpec:
    """What every recording task needs: the record file and this run's process marker."""

    log: Path
    marker: str


def dag_job(index: int, rng: random.Random, ctx: TaskContextSpec) -> dict[str, Any]:
    """A run-now job: a split into three branches (one sleeping 1-3 s) and a join; every
    ``LANE_EVERY``-th one with ``LANE_TASKS`` more on the lanes' key."""
    slow = rng.choice([1.0, 2.0, 3.0])
    lanes = [f"{LANE_PREFIX}{i}" for i in range(LANE_TASKS if index % LANE_EVERY == 0 else 0)]
    tasks = [
        shell_task("prepare", ctx, next_=["slow", "fast", "flaky", *lanes]),
        shell_task("slow", ctx, sleep_s=slow, next_=["join"]),
        shell_task("fast", ctx, next_=["join"]),
        {**shell_task("flaky", ctx, sleep_s=0.5, fail_until=rng.choice([0, 1]), retries=2,
                      next_=["join"]),
         "concurrency": [{"key": FLOW_KEY, "limit": FLOW_LIMIT}]},
        *({**shell_task(name, ctx, sleep_s=rng.choice([0.05, 0.05, 0.3]),
                        fail_until=rng.choice([0, 0, 1]), retries=1, next_=["join"]),
           "concurrency": [{"key": LANE_KEY, "limit": LANE_LIMIT}]} for name in lanes),
        shell_task("join", ctx, next_=["report"]),
        shell_task("report", ctx),
    ]
    return {"name": f"{DAG_PREFIX}{index}", "tasks": tasks}


def cron_job(index: int, ctx: TaskContextSpec) -> dict[str, Any]:
    """An every-minute job of two tasks."""
    tasks = [shell_task("tick", ctx, next_=["tock"]), shell_task("tock", ctx, sleep_s=1.0)]
    return {"name": f"{CRON_PREFIX}{index}", "schedule": {"cron": "* * * * *"}, "tasks": tasks}


def wide_job(index: int, size: int, ctx: TaskContextSpec, *, long_s: float = 0.0,
             longs: int = 0) -> dict[str, Any]:
    """A split into ``size`` tasks of 1-2 s (``longs`` of them ``long_s``) and a join:
    many attempts in flight at once."""
    names = [f"wide-{i}" for i in range(size)]
    tasks = [shell_task("start", ctx, next_=names)]
    tasks += [shell_task(name, ctx, sleep_s=long_s if i < longs else 1.0 + (i % 2),
                         next_=["join"]) for i, name in enumerate(names)]
    tasks.append(shell_task("join", ctx))
    return {"name": f"{WIDE_PREFIX}{index}", "tasks": tasks}


def storm_job(size: int, ctx: TaskContextSpec) -> dict[str, Any]:
    """``size`` tasks that fail twice at once and retry: a retry storm."""
    names = [f"storm-{i}" for i in range(size)]
    tasks = [shell_task("start", ctx, next_=names)]
    tasks += [shell_task(name, ctx, fail_until=2, retries=3) for name in names]
    return {"name": f"{STORM_PREFIX}{size}", "tasks": tasks}


class Api:
    """The few REST calls the suite makes, as the admin."""

    def __init__(self, base: str, token: str) -> None:
        self._http = httpx.Client(base_url=base, timeout=30,
                                  headers={"Authorization": f"Bearer {token}"})

    def create_job(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs``; raises ``httpx.HTTPError`` on a refusal or a transport error."""
        response = self._http.post("/jobs", json=spec)
        response.raise_for_status()
        return dict(response.json())

    def disable_job(self, job_id: str) -> None:
        """Stop a cron job firing."""
        self._http.patch(f"/jobs/{job_id}", json={"enabled": False}).raise_for_status()

    def subscribe(self, url: str, secret: str) -> None:
        """Subscribe a webhook to every event."""
        body = {"events": ["*"], "target": {"webhook": {"url": url, "secret": secret}}}
        self._http.post("/subscriptions", json=body).raise_for_status()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


class LoadGenerator:
    """Submits a DAG job every ``interval_s`` on a thread until stopped."""

    def __init__(self, api: Api, ctx: TaskContextSpec, rng: random.Random,
                 interval_s: float) -> None:
        self._api = api
        self._ctx = ctx
        self._rng = rng
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)
        self.submitted = 0
        self.refused: list[str] = []

    def start(self) -> None:
        """Start submitting."""
        self._thread.start()

    def stop(self) -> None:
        """Stop submitting and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(40)

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            started = time.monotonic()
            index += 1
            try:
                self._api.create_job(dag_job(index, self._rng, self._ctx))
                self.submitted += 1
            except httpx.HTTPError as error:
                # An outage refuses submissions: counted, not an invariant (a client retries).
                self.refused.append(f"{type(error).__name__}: {str(error)[:80]}")
            self._stop.wait(max(0.0, self._interval_s - (time.monotonic() - started)))


@dataclass(frozen=True)
class Execution:
    """One line of the record file."""

    kind: str  # start or end
    run_id: str
    task: str
    attempt: int
    key: str
    pid: int
    at: float
    code: int | None


def read_executions(path: Path) -> list[Execution]:
    """Parse the record file (a torn last line of a killed task is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 7 or parts[0] not in ("start", "end"):
            continue
        try:
            code = int(parts[7]) if len(parts) > 7 else None
            out.append(Execution(parts[0], parts[1], parts[2], int(parts[3]), parts[4],
                                 int(parts[5]), float(parts[6]), code))
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class Delivery:
    """One webhook POST the receiver got."""

    received_at: float
    event_id: str
    event: str
    run_id: str | None
    task: str | None
    attempt: int | None
    previous: str | None
    state: str | None


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 recording every delivery; answers 200 at once."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.deliveries: list[Delivery] = []
        self.bad_signatures = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="chaos-webhook", daemon=True)

    @property
    def url(self) -> str:
        """Where notify POSTs."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> None:
        """Serve on a thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (and close the socket even if it never served)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[Delivery]:
        """The deliveries so far."""
        with self._lock:
            return list(self.deliveries)

    def first_after(self, moment: float) -> float | None:
        """When the first delivery after ``moment`` arrived."""
        with self._lock:
            return next((d.received_at for d in self.deliveries if d.received_at > moment), None)

    def record(self, headers: dict[str, str], body: bytes) -> None:
        """Keep one POST (called by the handler thread)."""
        stamp, sig = headers.get("x-stellwerk-timestamp", ""), headers.get(
            "x-stellwerk-signature", "")
        mac = hmac.new(self.secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
        event = json.loads(body)
        delivery = Delivery(
            time.time(), str(event.get("id") or headers.get("x-stellwerk-event-id")),
            str(event.get("event")), event.get("run_id"), event.get("task"),
            event.get("attempt"), event.get("previous"), event.get("state"),
        )
        with self._lock:
            self.deliveries.append(delivery)
            if not hmac.compare_digest("sha256=" + mac.hexdigest(), sig):
                self.bad_signatures += 1

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    receiver.record({k.lower(): v for k, v in self.headers.items()}, body)
                    status = 200
                except (ValueError, TypeError):
                    status = 400
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        return Handler
