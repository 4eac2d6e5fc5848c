"""The faults the chaos suite injects, one at a time, and how it measures recovery.

Each ``inject_*`` function does one fault to the running system and returns a
:class:`Fault`: when it struck, when it was over (the component restarted, the server
back, the connections released) and what recovery means for it. :func:`recovery_s`
measures that from the journal or the webhook stream, for the wait before the next
fault and for the final table.
"""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import psycopg
import redis

from bench import chaos_db as db
from bench.chaos_load import Api, TaskContextSpec, WebhookReceiver, storm_job
from bench.chaos_system import RESTART_DELAY_S, Servers, Supervisor
from common.messaging.wire import open_envelope

WORKER_TARGET_S = 10.0  # issue 13: a dead worker's attempts requeued within 10 s
COMPONENT_TARGET_S = 5.0  # engine, beat, notify: 5 s after the restart
SERVER_TARGET_S = 2.0  # Redis or PostgreSQL back: first state change within 2 s
MAX_CONNECTIONS_TRIED = 1000


@dataclass
class Chaos:
    """What the faults act on."""

    supervisor: Supervisor
    servers: Servers
    api: Api
    receiver: WebhookReceiver
    tasks: TaskContextSpec
    rng: random.Random
    lease_ttl_s: float
    storm_size: int
    hold_s: float  # how long pool exhaustion lasts

    @property
    def db(self) -> str:
        """The database URL (it stays the same across a PostgreSQL restart)."""
        return self.servers.database_url


@dataclass
class Fault:
    """One injected fault and what recovery from it means."""

    kind: str
    at: float
    back: float
    target_s: float | None
    measure: str  # requeue | held | change | webhook | storm (MEASURES in chaos_checks)
    detail: str = ""
    held: list[db.Attempt] = field(default_factory=list)
    job_id: str = ""
    taken: list[db.Taken] = field(default_factory=list)  # a killed engine's messages
    recovery: float | None = None
    notes: list[str] = field(default_factory=list)  # evidence for the table

    @property
    def started(self) -> str:
        """The fault's wall-clock time, for the log."""
        return datetime.fromtimestamp(self.at, UTC).strftime("%H:%M:%S")


def recovery_s(chaos: Chaos, fault: Fault) -> float | None:
    """Seconds to recovery, measured as the fault's ``measure`` says; None: not yet."""
    if fault.measure == "requeue":
        done = db.requeued_after(chaos.db, fault.held, fault.at)
        return None if done is None else done - fault.at
    if fault.measure == "webhook":
        first = chaos.receiver.first_after(fault.back)
        return None if first is None else first - fault.back
    if fault.measure == "held":
        applied = db.applied_after(chaos.db, fault.taken, fault.at)
        return None if applied is None else max(0.0, applied - fault.back)
    if fault.measure == "storm":
        finished = db.run_finished_at(chaos.db, fault.job_id)
        return None if finished is None else finished - fault.at
    first = db.first_change_after(chaos.db, fault.back)
    return None if first is None else max(0.0, first - fault.back)


def explain(chaos: Chaos, fault: Fault) -> list[str]:
    """For a worker fault: what became of each attempt it held, slowest first."""
    if fault.measure != "requeue":
        return []
    changes = db.next_changes(chaos.db, fault.held, fault.at) or []
    changes.sort(key=lambda c: c.at if c.at is not None else float("inf"), reverse=True)
    return [f"run {c.attempt[0]} task {c.attempt[1]} attempt {c.attempt[2]}: "
            + (f"{c.at - fault.at:.1f} s after the fault, {c.change}" if c.at else c.change)
            for c in changes]


def _busiest_worker(chaos: Chaos, wait_s: float = 15.0) -> tuple[str, list[db.Attempt]]:
    """The worker holding the most ACTIVE attempts (waits a little for one with any)."""
    deadline = time.monotonic() + wait_s
    while True:
        held = {name: db.active_attempts(chaos.db, chaos.supervisor.pid(name))
                for name in ("worker-1", "worker-2")}
        name = max(held, key=lambda n: len(held[n]))
        if held[name] or time.monotonic() > deadline:
            return name, held[name]
        time.sleep(0.3)


def _still_held(chaos: Chaos, pid: int, held: list[db.Attempt]) -> list[db.Attempt]:
    """Those of ``held`` still ACTIVE once the worker is stopped or dead.

    An attempt whose end the engine committed between the look and the signal has no
    change left to make: counted as held, it would read as never requeued.
    """
    now_active = set(db.active_attempts(chaos.db, pid))
    return [attempt for attempt in held if attempt in now_active]


def inject_worker_kill(chaos: Chaos) -> Fault:
    """SIGKILL the busiest worker; its ACTIVE attempts must be requeued."""
    name, held = _busiest_worker(chaos)
    pid = chaos.supervisor.pid(name)
    at, back = chaos.supervisor.kill(name)
    held = _still_held(chaos, pid, held)
    return Fault("worker-kill", at, back, WORKER_TARGET_S, "requeue" if held else "change",
                 f"{name} held {len(held)} ACTIVE attempts", held)


def inject_worker_stop(chaos: Chaos) -> Fault:
    """SIGSTOP the busiest worker past its lease, then SIGCONT: its attempts must be
    requeued, and its late reports of them ignored."""
    name, held = _busiest_worker(chaos)
    stopped_s = max(chaos.lease_ttl_s, WORKER_TARGET_S) + 5.0
    at = chaos.supervisor.signal(name, signal.SIGSTOP)
    held = _still_held(chaos, chaos.supervisor.pid(name), held)
    time.sleep(stopped_s)
    back = chaos.supervisor.signal(name, signal.SIGCONT)
    return Fault("worker-stop", at, back, WORKER_TARGET_S, "requeue" if held else "change",
                 f"{name} stopped {stopped_s:.0f} s holding {len(held)} ACTIVE attempts", held)


def _kill_component(kind: str, name: str, measure: str) -> Callable[[Chaos], Fault]:
    def inject(chaos: Chaos) -> Fault:
        at, back = chaos.supervisor.kill(name)
        return Fault(kind, at, back, COMPONENT_TARGET_S, measure,
                     f"{name} SIGKILLed, restarted after {back - at:.1f} s")

    inject.__doc__ = f"SIGKILL {name} and restart it as compose would."
    return inject


def _redis(chaos: Chaos) -> redis.Redis:
    return redis.Redis.from_url(chaos.servers.redis_url, socket_timeout=2)


def inject_engine_kill(chaos: Chaos) -> Fault:
    """SIGKILL an engine, in the middle of a batch when one is caught in time.

    Messages it had taken but not acknowledged sit in its processing list
    (``common/messaging/reliable.py``) until another engine puts them back. Recovery is
    the time, after the restart, until each such message was applied (its batch
    committed; a heartbeat changes nothing and is left out); with none, the first state
    change.
    """
    name = _engine_mid_batch(chaos) or chaos.rng.choice(["engine-1", "engine-2"])
    key = _processing_key(chaos, name)
    at, back = chaos.supervisor.kill(name)
    try:
        with _redis(chaos) as client:
            raw = client.lrange(key, 0, -1)
    except redis.RedisError:
        raw = []
    taken = [_named(chaos, t) for t in map(_taken, raw) if t is not None]
    detail = (f"{name} SIGKILLed holding {len(raw)} taken messages ({len(taken)} not "
              f"heartbeats), restarted after {back - at:.1f} s")
    if taken:
        return Fault("engine-kill", at, back, COMPONENT_TARGET_S, "held", detail, taken=taken,
                     notes=[f"taken by {name}: {t.describe()}" for t in taken])
    return Fault("engine-kill", at, back, COMPONENT_TARGET_S, "change", detail)


def _processing_key(chaos: Chaos, engine: str) -> str:
    """The Redis list of messages ``engine`` has taken and not yet acknowledged."""
    return f"stellwerk:processing:engine:{socket.gethostname()}:{chaos.supervisor.pid(engine)}"


def _engine_mid_batch(chaos: Chaos) -> str | None:
    """An engine caught holding taken messages (in the middle of a batch), polled every
    few milliseconds so that the kill strikes mid-batch.

    It waits first for the hardest case, a worker's ``finished`` report (nothing else
    brings its task on), then for any message but a heartbeat; None when no engine was
    caught.
    """
    keys = {name: _processing_key(chaos, name) for name in ("engine-1", "engine-2")}
    with _redis(chaos) as client:
        for wait_s, wanted in ((6.0, {"finished"}), (3.0, None)):
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                for name, key in keys.items():
                    with contextlib.suppress(redis.RedisError):
                        if any(_wanted(r, wanted) for r in client.lrange(key, 0, -1)):
                            return name
                time.sleep(0.002)
    return None


def _wanted(raw: bytes | str, kinds: set[str] | None) -> bool:
    """Whether a taken message is of one of ``kinds`` (None: any but a heartbeat)."""
    taken = _taken(raw)
    return taken is not None and (kinds is None or taken.kind in kinds)


def _named(chaos: Chaos, taken: db.Taken) -> db.Taken:
    """``taken`` with its task's name (a result names only the task run)."""
    if taken.task or not taken.task_run_id:
        return taken
    rows = db.query(chaos.db, "SELECT name FROM task_runs WHERE id::text = %s",
                    (taken.task_run_id,))
    return replace(taken, task=rows[0][0]) if rows else taken


def _taken(raw: bytes | str) -> db.Taken | None:
    """The run (and task run) an engine message is about; None for a heartbeat."""
    try:
        received = open_envelope(raw)
    except ValueError:
        return None
    body = received.payload if isinstance(received.payload, dict) else {}
    kind = str(body.get("kind") or body.get("signal") or "")
    if kind == "heartbeat" or not body.get("run_id"):
        return None
    return db.Taken(str(received.task_name), kind, str(body["run_id"]),
                    body.get("task_run_id"), body.get("task"), body.get("attempt"),
                    str(body.get("message_id") or ""))


def inject_beat_kill(chaos: Chaos) -> Fault:
    """SIGKILL a beat just before a minute's cron fires when that is near enough."""
    second = datetime.now(UTC).second
    if second >= 40:
        time.sleep(max(0.0, 58.0 - second - datetime.now(UTC).microsecond / 1e6))
    name = chaos.rng.choice(["beat-1", "beat-2"])
    return _kill_component("beat-kill", name, "change")(chaos)


inject_notify_kill = _kill_component("notify-kill", "notify", "webhook")


def inject_redis_flush(chaos: Chaos) -> Fault:
    """SIGKILL Redis and restart it empty on the same port."""
    at = time.time()
    chaos.servers.kill_redis_and_wipe()
    time.sleep(RESTART_DELAY_S)
    chaos.servers.start_redis()
    return Fault("redis-flush", at, time.time(), SERVER_TARGET_S, "change",
                 "redis-server SIGKILLed, data files deleted, restarted empty")


def inject_pg_kill(chaos: Chaos) -> Fault:
    """SIGKILL the postmaster and its backends, then restart it (crash recovery)."""
    at = time.time()
    killed = chaos.servers.kill_postgres()
    time.sleep(RESTART_DELAY_S)
    chaos.servers.start_postgres()
    return Fault("pg-kill", at, time.time(), SERVER_TARGET_S, "change",
                 f"{killed} PostgreSQL processes SIGKILLed, server restarted")


def inject_pg_terminate(chaos: Chaos) -> Fault:
    """``pg_terminate_backend`` every client connection to the Stellwerk database."""
    at = time.time()
    rows = db.query(chaos.db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                              "AND backend_type = 'client backend'")
    count = rows[0][0] if rows else "?"
    return Fault("pg-terminate", at, time.time(), SERVER_TARGET_S, "change",
                 f"{count} connections terminated")


def inject_retry_storm(chaos: Chaos) -> Fault:
    """A run of ``storm_size`` tasks failing twice each and retrying at once."""
    at = time.time()
    job = chaos.api.create_job(storm_job(chaos.storm_size, chaos.tasks))
    return Fault("retry-storm", at, at, None, "storm",
                 f"{chaos.storm_size} tasks x 3 attempts (2 failing), retry_backoff 1 s",
                 job_id=str(job["id"]))


TERMINATE_OTHERS = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
    "current_database() AND backend_type = 'client backend' AND NOT pid = ANY(%s)"
)
COUNT_OTHERS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND backend_type = 'client backend' AND NOT pid = ANY(%s)"
)
GRAB_AFTER_TERMINATE_S = 2.0


def _grab(url: str, hogs: list[psycopg.Connection[tuple[object, ...]]], limit: int) -> None:
    """Open connections into ``hogs`` until PostgreSQL refuses the next one."""
    while len(hogs) < limit:
        try:
            hogs.append(psycopg.connect(url, connect_timeout=3, autocommit=True))
        except psycopg.OperationalError:
            return


def inject_pool_exhaust(chaos: Chaos) -> Fault:
    """Take every connection slot PostgreSQL has, then terminate Stellwerk's connections.

    The suite opens connections until the server refuses the next ("too many clients"),
    terminates every other client connection, and takes the slots that frees: every
    component's pool is then empty and cannot open a connection until the suite lets
    go after ``hold_s``. Recovery is the first state change after the release.
    """
    limit = db.query(chaos.db, "SHOW max_connections")
    hogs: list[psycopg.Connection[tuple[object, ...]]] = []
    at = time.time()
    try:
        _grab(chaos.db, hogs, MAX_CONNECTIONS_TRIED)
        mine = [h.info.backend_pid for h in hogs]
        terminated = hogs[0].execute(TERMINATE_OTHERS, (mine,)).fetchone() if hogs else None
        deadline = time.monotonic() + GRAB_AFTER_TERMINATE_S
        while time.monotonic() < deadline:
            _grab(chaos.db, hogs, MAX_CONNECTIONS_TRIED)
            time.sleep(0.05)
        time.sleep(max(0.0, chaos.hold_s - (time.time() - at)))
        mine = [h.info.backend_pid for h in hogs]
        theirs = hogs[0].execute(COUNT_OTHERS, (mine,)).fetchone() if hogs else None
    finally:
        for conn in hogs:
            with contextlib.suppress(psycopg.Error):
                conn.close()
    back = time.time()
    during = db.changes_between(chaos.db, at + GRAB_AFTER_TERMINATE_S, back)
    return Fault("pool-exhaust", at, back, SERVER_TARGET_S, "change",
                 f"took {len(hogs)} of {limit[0][0] if limit else '?'} connection slots for "
                 f"{back - at:.0f} s and terminated Stellwerk's "
                 f"{terminated[0] if terminated else '?'} connections; Stellwerk held "
                 f"{theirs[0] if theirs else '?'} at the end, made {during} state changes "
                 "meanwhile")


FAULTS: dict[str, Callable[[Chaos], Fault]] = {
    "worker-kill": inject_worker_kill,
    "engine-kill": inject_engine_kill,
    "beat-kill": inject_beat_kill,
    "notify-kill": inject_notify_kill,
    "redis-flush": inject_redis_flush,
    "pg-kill": inject_pg_kill,
    "pg-terminate": inject_pg_terminate,
    "worker-stop": inject_worker_stop,
    "retry-storm": inject_retry_storm,
    "pool-exhaust": inject_pool_exhaust,
}
