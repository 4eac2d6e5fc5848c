"""Chaos suite (issue 13): faults under load, then the invariants that must still hold.

    .venv/bin/python bench/chaos.py --short      # one fault of each kind, < 5 minutes
    .venv/bin/python bench/chaos.py              # more load, longer watch after each fault
    .venv/bin/python bench/chaos.py --faults redis-flush,pg-kill --seed 7 --keep-logs

It starts PostgreSQL, Redis and every component as separate processes (two engines,
two beats, two workers, notify, api), a webhook receiver subscribed to all events, a
load of every-minute crons and DAG jobs whose shell tasks record each execution, then
injects the faults one at a time, waits for quiescence and prints the invariants as a
table (bench/README.md, "Chaos suite"). Exit status 1 when one fails, 2 on bad input or
a system that does not start; everything it started is stopped either way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import psutil

if __package__ in (None, ""):  # run as a script: make ``bench`` and the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import chaos_db as db
from bench.chaos_checks import (
    Check,
    CronWindow,
    Observed,
    check_all,
    recovery_summary,
    render,
    undelivered,
)
from bench.chaos_faults import FAULTS, Chaos, Fault, explain, recovery_s
from bench.chaos_load import (
    Api,
    LoadGenerator,
    TaskContextSpec,
    WebhookReceiver,
    cron_job,
    read_executions,
    wide_job,
)
from bench.chaos_system import (
    ChaosError,
    ProcessWatch,
    Servers,
    Supervisor,
    kill_marked_processes,
    require_free_port,
    wait_until,
)
from bench.harness import free_port

ADMIN_TOKEN = "chaos-admin-token"
SECRET_KEY = "chaos-secret-key"
CHECKOUT = Path(__file__).resolve().parents[1]
WORKER_TYPES = "noop,sleep,python,shell"
WORKER_CONCURRENCY = "8"
BURST_LEAD_S = 1.5  # from the wide job's submission to the fault
LONG_TASKS = 4  # tasks of the wide job before a worker kill that outlast the requeue
LONG_TASK_PAST_LEASE_S = 10.0
DISABLE_TIMEOUT_S = 60.0
NOTES_SHOWN = 3  # evidence lines printed with a fault's progress line


@dataclass(frozen=True)
class Sizes:
    """How much load, and how long the suite watches."""

    crons: int  # every-minute cron jobs
    wide: int  # tasks of the wide job submitted just before each fault
    dag_interval_s: float  # one DAG job submitted this often
    storm_size: int  # tasks of the retry storm
    hold_s: float  # how long the connection slots are held
    warmup_s: float  # load before the first fault
    gap_s: float  # calm after a fault's recovery, before the next
    fault_wait_s: float  # longest wait for a fault's recovery (a worker's: plus the lease)
    quiesce_s: float  # longest wait for every run to end, and for every delivery


SHORT = Sizes(crons=3, wide=30, dag_interval_s=2.0, storm_size=100, hold_s=8.0,
              warmup_s=10.0, gap_s=2.0, fault_wait_s=30.0, quiesce_s=60.0)
FULL = Sizes(crons=40, wide=60, dag_interval_s=1.5, storm_size=300, hold_s=20.0,
             warmup_s=30.0, gap_s=15.0, fault_wait_s=60.0, quiesce_s=180.0)


@dataclass(frozen=True)
class Plan:
    """What one suite run does: which faults, with how much load."""

    faults: list[str]
    sizes: Sizes
    seed: int
    keep_logs: bool
    checkout: Path
    api_port: int | None
    redis_port: int | None


def parse_args(argv: list[str] | None) -> Plan:
    """The plan from the command line (``--short`` picks the small one)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--short", action="store_true",
                        help="one fault of each kind, small load, under 5 minutes (CI)")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"comma-separated, in order (default all: {','.join(FAULTS)})")
    parser.add_argument("--rounds", type=int, default=1,
                        help="inject the list of faults this many times (p50 / max per kind)")
    parser.add_argument("--seed", type=int, default=13,
                        help="chooses the engine and beat to kill and the DAG sleeps")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep the scratch directory (logs, records) even when all pass")
    parser.add_argument("--checkout", type=Path, default=CHECKOUT,
                        help="the Stellwerk checkout whose .venv runs the components")
    parser.add_argument("--api-port", type=int, help="default: a free port")
    parser.add_argument("--redis-port", type=int, help="default: a free port")
    args = parser.parse_args(argv)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        parser.error(f"unknown faults {unknown}; choose from {','.join(FAULTS)}")
    return Plan(faults * max(1, args.rounds), SHORT if args.short else FULL, seed=args.seed,
                keep_logs=args.keep_logs,
                checkout=args.checkout.resolve(), api_port=args.api_port,
                redis_port=args.redis_port)


def say(text: str) -> None:
    """A progress line with the time."""
    print(f"{datetime.now(UTC):%H:%M:%S} {text}", flush=True)


class Suite:
    """One run of the suite: start, load, faults, quiescence, checks, stop."""

    def __init__(self, plan: Plan, workdir: Path) -> None:
        self.plan = plan
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.logs.mkdir()
        self.marker = f"chaos-{uuid.uuid4().hex[:12]}"
        self.tasks = TaskContextSpec(workdir / "executions.log", self.marker)
        self.rng = random.Random(plan.seed)
        self.api_port = plan.api_port or free_port()
        self.servers = Servers(workdir, plan.redis_port or free_port())
        self.receiver = WebhookReceiver(secret=uuid.uuid4().hex)
        self.procs = ProcessWatch(self.marker)
        self.supervisor: Supervisor | None = None
        self.api: Api | None = None
        self.load: LoadGenerator | None = None
        self.crons: dict[str, datetime] = {}
        self.faults: list[Fault] = []
        self.busy: dict[str, float] = {}
        self.disabled = datetime.now(UTC)

    @property
    def api_base(self) -> str:
        """The API's base URL."""
        return f"http://127.0.0.1:{self.api_port}/api/v1"

    def start(self) -> Chaos:
        """Servers, schema, components, webhook subscription, crons and the load."""
        self.busy["before"] = psutil.cpu_percent(interval=1.0)
        say(f"starting PostgreSQL and Redis under {self.workdir}")
        try:
            self.servers.start()
        except (RuntimeError, OSError) as error:
            raise ChaosError(f"the embedded servers did not start: {error}") from error
        self.supervisor = Supervisor(self.plan.checkout, self._env(), self.logs)
        self.supervisor.run_once("migrate")
        self._start_components(self.supervisor)
        self.api = Api(self.api_base, ADMIN_TOKEN)
        self.receiver.start()
        self.procs.start()
        self.api.subscribe(self.receiver.url, self.receiver.secret)
        for index in range(self.plan.sizes.crons):
            created = datetime.now(UTC)
            self.crons[str(self.api.create_job(cron_job(index, self.tasks))["id"])] = created
        self.load = LoadGenerator(self.api, self.tasks, self.rng, self.plan.sizes.dag_interval_s)
        self.load.start()
        return Chaos(self.supervisor, self.servers, self.api, self.receiver, self.tasks,
                     self.rng, _lease_ttl_s(self.plan.checkout, self._env()),
                     self.plan.sizes.storm_size, self.plan.sizes.hold_s)

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "STELLWERK_DATABASE_URL": self.servers.database_url,
            "STELLWERK_REDIS_URL": self.servers.redis_url,
            "STELLWERK_ADMIN_TOKEN": ADMIN_TOKEN,
            "STELLWERK_SECRET_KEY": SECRET_KEY,
            "STELLWERK_API_URL": f"http://127.0.0.1:{self.api_port}",
            "STELLWERK_DATA_DIR": str(self.workdir / "data"),
            # The receiver is on loopback, which an egress policy may refuse by default.
            "STELLWERK_EGRESS_ALLOW": "127.0.0.0/8",
            # The receiver never fails; short retries keep quiescence short after an outage.
            "STELLWERK_WEBHOOK_RETRY_BASE_S": "0.5",
            "STELLWERK_WEBHOOK_RETRY_MAX_S": "5",
            "PYTHONUNBUFFERED": "1",
        }

    def _start_components(self, sup: Supervisor) -> None:
        say("starting api, 2 engines, 2 beats, notify, 2 workers")
        sup.add("api", "api", "--port", str(self.api_port))
        for name in ("engine-1", "engine-2"):
            sup.add(name, "engine")
        for name in ("beat-1", "beat-2"):
            sup.add(name, "beat")
        sup.add("notify", "notify")
        for name in ("worker-1", "worker-2"):
            sup.add(name, "worker", "--types", WORKER_TYPES, "--concurrency",
                    WORKER_CONCURRENCY)
        sup.wait_started(self.api_base, settle_s=3.0)
        sup.watch()

    def inject(self, chaos: Chaos) -> None:
        """Each fault in turn, waiting for its recovery (or a timeout) before the next."""
        say(f"load running; warming up {self.plan.sizes.warmup_s:.0f} s")
        time.sleep(self.plan.sizes.warmup_s)
        cpu_before = psutil.cpu_times()
        for index, kind in enumerate(self.plan.faults):
            self._burst(chaos, index, kind)
            say(f"{kind} ...")
            try:
                fault = FAULTS[kind](chaos)
            except Exception as error:  # a server that does not come back, an API refusal
                raise ChaosError(f"{kind} could not be injected: {type(error).__name__}: "
                                 f"{str(error).splitlines()[0] if str(error) else ''}") from error
            wait_s = self.plan.sizes.fault_wait_s + (chaos.lease_ttl_s if kind.startswith("worker")
                                               else 0.0)
            wait_until(partial(_recovered, chaos, fault), wait_s)
            fault.recovery = recovery_s(chaos, fault)
            fault.notes += explain(chaos, fault)
            shown = "not within the wait" if fault.recovery is None else (
                f"{fault.recovery:.1f} s")
            say(f"{kind}: {fault.detail}; recovery {shown}")
            for note in fault.notes[:NOTES_SHOWN]:
                say(f"  {note}")
            self.faults.append(fault)
            time.sleep(self.plan.sizes.gap_s)
        self.busy["faults"] = _busy_since(cpu_before)

    def _burst(self, chaos: Chaos, index: int, kind: str) -> None:
        """A wide job just before a fault, so that it strikes many attempts in flight:
        READY ones claimed by a worker, ACTIVE ones, results on their way back.

        Before a worker is killed, some of its tasks outlast the lease and the requeue:
        their processes must die with the worker, not overlap the next attempt.
        """
        longs = LONG_TASKS if kind == "worker-kill" else 0
        spec = wide_job(index, self.plan.sizes.wide, self.tasks, longs=longs,
                        long_s=chaos.lease_ttl_s + LONG_TASK_PAST_LEASE_S)
        try:
            chaos.api.create_job(spec)
        except httpx.HTTPError as error:
            say(f"the wide job was refused: {error}")
        time.sleep(BURST_LEAD_S)

    def quiesce(self) -> None:
        """Stop the load and the crons; wait until every run ended and deliveries stop."""
        assert self.load is not None and self.api is not None
        self.load.stop()
        enabled = set(self.crons)
        wait_until(partial(_disable_all, self.api, enabled), DISABLE_TIMEOUT_S, poll_s=1.0)
        self.disabled = datetime.now(UTC)
        say(f"load stopped ({self.load.submitted} DAG jobs, {len(self.load.refused)} "
            "submissions refused); waiting for every run to end")
        url = self.servers.database_url
        wait_until(lambda: db.unfinished_runs(url) == 0, self.plan.sizes.quiesce_s, poll_s=1.0)
        say("waiting for every state change to reach the webhook")
        wait_until(partial(_all_delivered, url, self.receiver), self.plan.sizes.quiesce_s, 2.0)
        _wait_quiet(self.receiver, 2.0, 30.0)  # repeats still on their way

    def check(self) -> list[Check]:
        """Read everything and check the invariants."""
        assert self.supervisor is not None
        windows = [CronWindow(job, created, self.disabled) for job, created in self.crons.items()]
        seen = Observed(db.read_record(self.servers.database_url),
                        read_executions(self.tasks.log), self.receiver.snapshot(),
                        self.receiver.bad_signatures, list(self.supervisor.exits),
                        self.faults, windows, self.procs.seen_until)
        return check_all(seen)

    def save_report(self, checks: list[Check]) -> None:
        """``report.json`` in the scratch directory: every check and fault, all evidence."""
        report = {"plan": {"faults": self.plan.faults, "sizes": asdict(self.plan.sizes),
                           "seed": self.plan.seed, "checkout": str(self.plan.checkout)},
                  "checks": [asdict(c) for c in checks],
                  "faults": [asdict(f) for f in self.faults],
                  "exits": [asdict(e) for e in self.supervisor.exits] if self.supervisor else [],
                  "busy": self.busy}
        (self.workdir / "report.json").write_text(json.dumps(report, indent=1, default=str))

    def stop(self) -> None:
        """Stop everything this run started; safe after a failed start, and each step
        runs even when one before it failed (the servers are stopped last)."""
        steps: list[Callable[[], object]] = [self.procs.stop, self.receiver.stop]
        if self.load is not None:
            steps.insert(0, self.load.stop)
        if self.supervisor is not None:
            steps.append(self.supervisor.stop_all)
        steps.append(partial(kill_marked_processes, self.marker))
        if self.api is not None:
            steps.append(self.api.close)
        steps.append(self.servers.stop)
        for step in steps:
            try:
                step()
            except Exception as error:  # noqa: BLE001 - the next steps must still run
                print(f"chaos: while stopping: {type(error).__name__}: {error}", file=sys.stderr)


def _check_checkout(checkout: Path) -> None:
    if not (checkout / "scheduler" / "cli" / "main.py").exists():
        raise ChaosError(f"{checkout} is not a Stellwerk checkout (no scheduler/cli/main.py)")
    if not (checkout / ".venv" / "bin" / "python").exists():
        raise ChaosError(f"{checkout} has no .venv/bin/python; install it first")


def _lease_ttl_s(checkout: Path, env: dict[str, str]) -> float:
    """The lease TTL the checkout's components will use (its default, or the env's)."""
    code = "from common.config import Settings; print(Settings().lease_ttl_s)"
    done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", code], cwd=checkout,
                          env=env, capture_output=True, text=True, check=False, timeout=60)
    try:
        return float(done.stdout.strip())
    except ValueError as error:
        raise ChaosError(f"cannot read the checkout's settings: {done.stderr.strip()[-200:]}"
                         ) from error


def _recovered(chaos: Chaos, fault: Fault) -> bool:
    return recovery_s(chaos, fault) is not None


def _all_delivered(url: str, receiver: WebhookReceiver) -> bool:
    try:
        record = db.read_record(url)
    except RuntimeError:
        return False
    return undelivered(record, receiver.snapshot()) == 0


def _disable_all(api: Api | None, enabled: set[str]) -> bool:
    """Disable the cron jobs still in ``enabled`` (removing them); True when none is left."""
    assert api is not None
    for job_id in list(enabled):
        try:
            api.disable_job(job_id)
        except httpx.HTTPError:
            return False
        enabled.discard(job_id)
    return True


def _wait_quiet(receiver: WebhookReceiver, quiet_s: float, timeout_s: float) -> None:
    """Wait until no delivery arrived for ``quiet_s`` (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    count = -1
    while time.monotonic() < deadline:
        now = len(receiver.snapshot())
        if now == count:
            return
        count = now
        time.sleep(quiet_s)


def _busy_since(before: Any) -> float:
    """How busy the whole machine was since ``before`` (percent of all cores)."""
    after = psutil.cpu_times()
    total = sum(after) - sum(before)
    idle = (after.idle + getattr(after, "iowait", 0.0)) - (
        before.idle + getattr(before, "iowait", 0.0))
    return 100.0 * (1.0 - idle / total) if total > 0 else 0.0


def _own_cpu_s() -> float:
    """CPU seconds the suite's process has used (its threads: load, receiver, sampler)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _raise_on_term(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def run(plan: Plan) -> int:
    """Run the suite; the exit status."""
    _check_checkout(plan.checkout)
    for port, what in ((plan.api_port, "API"), (plan.redis_port, "Redis")):
        if port is not None:
            require_free_port(port, what)
    workdir = Path(tempfile.mkdtemp(prefix="stellwerk-chaos-"))
    suite = Suite(plan, workdir)
    started = time.monotonic()
    failed = True
    try:
        chaos = suite.start()
        suite.inject(chaos)
        suite.quiesce()
        checks = suite.check()
        failed = not all(c.ok for c in checks)
        suite.save_report(checks)
        print(render(checks), flush=True)
        for line in recovery_summary(suite.faults):
            print(line)
        print(f"\nmachine busy: {suite.busy.get('before', 0):.0f}% before the start, "
              f"{suite.busy.get('faults', 0):.0f}% during the faults "
              f"({psutil.cpu_count()} cores); load average {os.getloadavg()[0]:.2f}; "
              f"the suite's own CPU {_own_cpu_s():.0f} s; seed {plan.seed}; "
              f"{time.monotonic() - started:.0f} s in all", flush=True)
    finally:
        suite.stop()
        if failed or plan.keep_logs:
            print(f"logs and records kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: a one-line error (status 2) for bad input or a system that won't start."""
    plan = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_on_term)
    try:
        return run(plan)
    except ChaosError as error:
        print(f"chaos: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chaos: interrupted; everything it started is stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
