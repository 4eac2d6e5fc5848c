"""The chaos suite's invariants, checked after quiescence, and the table that reports them.

Each ``check_*`` function reads what was observed (the database's record, the tasks'
execution records, the webhook deliveries, the supervisor's exits, the faults) and
returns a :class:`Check`: passed or not, the figures, and evidence for a failure
(which run, task, attempt, component).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.chaos_db import Record
from bench.chaos_faults import Fault
from bench.chaos_load import (
    CRON_PREFIX,
    FLOW_LIMIT,
    LANE_LIMIT,
    LANE_PREFIX,
    Delivery,
    Execution,
)
from bench.chaos_system import Exit

TERMINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELED"}
RUN_EVENTS = {"CONFIRM": "run.confirm", "PAUSED": "run.paused", "COMPLETED": "run.completed",
              "FAILED": "run.failed", "TIMEOUT": "run.timeout", "CANCELED": "run.canceled"}
CRASH_LOOP_EXITS = 3  # unexpected exits of one component within CRASH_LOOP_WINDOW_S
CRASH_LOOP_WINDOW_S = 60.0
CRON_MARGIN = timedelta(seconds=5)  # a minute this close to the disable is not expected
EVIDENCE_LINES = 6

EventKey = tuple[str, str, str | None, int | None, str, str | None]


@dataclass
class Check:
    """One row of the table."""

    name: str
    ok: bool
    figures: str
    evidence: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CronWindow:
    """A cron job and the time during which each of its minutes must have one run."""

    job_id: str
    created: datetime
    disabled: datetime


@dataclass
class Observed:
    """What the checks read."""

    record: Record
    executions: list[Execution]
    deliveries: list[Delivery]
    bad_signatures: int
    exits: list[Exit]
    faults: list[Fault]
    crons: list[CronWindow]
    seen_until: Callable[[int, float], float | None]  # a task process last seen alive


def check_all(seen: Observed) -> list[Check]:
    """Every invariant, in the order of the table."""
    return [
        check_terminal(seen), check_cron_once(seen), check_no_double(seen),
        check_no_overlap(seen), check_completed_ran(seen), check_flow_limit(seen),
        check_lane_limit(seen),
        check_flow_released(seen), check_webhook(seen),
        check_exits(seen), *check_recoveries(seen.faults),
    ]


def check_terminal(seen: Observed) -> Check:
    """Every run ended (COMPLETED, FAILED, TIMEOUT or CANCELED)."""
    states = Counter(r[3] for r in seen.record.runs)
    stuck = [r for r in seen.record.runs if r[3] not in TERMINAL]
    tasks = _tasks_by_run(seen.record)
    evidence = [f"run {r[0]} ({r[2]}) {r[3]}: "
                + ", ".join(f"{t[1]} {t[2]}#{t[3]}" for t in tasks[r[0]]
                            if t[2] not in ("COMPLETED", "SKIPPED"))
                for r in stuck]
    figures = f"{len(seen.record.runs)} runs: " + ", ".join(
        f"{n} {s}" for s, n in sorted(states.items()))
    return Check("every run terminal", not stuck, figures, evidence)


def _tasks_by_run(record: Record) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = defaultdict(list)
    for row in record.task_runs:
        out[row[0]].append(row)
    return out


def check_cron_once(seen: Observed) -> Check:
    """Exactly one run per (cron job, nominal minute) inside the job's window."""
    runs: dict[str, Counter[datetime]] = defaultdict(Counter)
    for row in seen.record.runs:
        if row[2].startswith(CRON_PREFIX):
            runs[row[1]][row[4].astimezone(UTC)] += 1
    expected = missing = doubled = 0
    evidence = []
    for cron in seen.crons:
        for minute in _minutes(cron.created, cron.disabled - CRON_MARGIN):
            expected += 1
            count = runs[cron.job_id].pop(minute, 0)
            if count != 1:
                missing, doubled = missing + (count == 0), doubled + (count > 1)
                evidence.append(f"job {cron.job_id} minute {minute:%H:%M}: {count} runs")
    figures = f"{expected} (job, minute) pairs: {missing} missing, {doubled} doubled"
    if not expected:
        figures += " (no whole minute in the cron window)"
    return Check("one run per cron job and minute", not evidence, figures, evidence)


def _minutes(start: datetime, end: datetime) -> Iterable[datetime]:
    """The whole minutes strictly after ``start`` up to ``end``."""
    minute = start.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    while minute <= end:
        yield minute
        minute += timedelta(minutes=1)


def check_no_double(seen: Observed) -> Check:
    """No (run, task, attempt) was started twice (its side effect recorded twice)."""
    starts = [e for e in seen.executions if e.kind == "start"]
    counts = Counter((e.run_id, e.task, e.attempt) for e in starts)
    doubled = {k: n for k, n in counts.items() if n > 1}
    evidence = []
    for (run, task, attempt), n in doubled.items():
        when = [f"pid {e.pid} at {_hms(e.at)}" for e in starts
                if (e.run_id, e.task, e.attempt) == (run, task, attempt)]
        evidence.append(f"run {run} task {task} attempt {attempt} executed {n}x: "
                        + "; ".join(when))
    figures = f"{len(starts)} executions, {len(counts)} attempts, {len(doubled)} doubled"
    return Check("no attempt executed twice", not doubled, figures, evidence)


def check_no_overlap(seen: Observed) -> Check:
    """A requeued attempt never starts while the process of the one before still runs.

    The earlier process ends at its ``end`` record; without one (killed), at the last
    time the suite saw it alive.
    """
    starts: dict[tuple[str, str], dict[int, Execution]] = defaultdict(dict)
    ends: dict[tuple[str, str, int], float] = {}
    for e in seen.executions:
        if e.kind == "start":
            starts[(e.run_id, e.task)][e.attempt] = e
        else:
            ends[(e.run_id, e.task, e.attempt)] = e.at
    evidence = []
    for (run, task), attempts in starts.items():
        ordered = sorted(attempts.items())
        for (a, first), (b, second) in zip(ordered, ordered[1:], strict=False):
            end = ends.get((run, task, a))
            alive = end if end is not None else seen.seen_until(first.pid, first.at)
            if alive is not None and second.at < alive:
                how = f"ended {_hms(end)}" if end is not None else f"seen alive {_hms(alive)}"
                evidence.append(f"run {run} task {task}: attempt {b} started {_hms(second.at)} "
                                f"while attempt {a} (pid {first.pid}) still ran ({how})")
    figures = f"{len(evidence)} overlapping attempts"
    return Check("no attempt overlaps the one before", not evidence, figures, evidence)


def check_completed_ran(seen: Observed) -> Check:
    """Every COMPLETED task's attempt has an execution that ended with exit code 0."""
    ended = {(e.run_id, e.task, e.attempt) for e in seen.executions
             if e.kind == "end" and e.code == 0}
    completed = [t for t in seen.record.task_runs if t[2] == "COMPLETED"]
    phantom = [t for t in completed if (t[0], t[1], t[3]) not in ended]
    evidence = [f"run {t[0]} task {t[1]} attempt {t[3]} COMPLETED (worker {t[4]}) "
                "with no successful execution recorded" for t in phantom]
    return Check("no COMPLETED task that never ran", not phantom,
                 f"{len(completed)} COMPLETED tasks, {len(phantom)} without an execution",
                 evidence)


def check_flow_limit(seen: Observed) -> Check:
    """No more attempts ACTIVE at once on the flow key than its limit (the journal's
    ACTIVE intervals of the DAG jobs' flaky tasks, which hold it)."""
    most, attempts = _most_active(seen, lambda task: task == "flaky")
    return Check("flow limit never exceeded", most <= FLOW_LIMIT,
                 f"at most {most} of {FLOW_LIMIT} ACTIVE, {attempts} attempts",
                 [] if most <= FLOW_LIMIT else [f"{most} flaky attempts ACTIVE at once"])


def check_lane_limit(seen: Observed) -> Check:
    """No more lane tasks' processes running at once than the key's limit: a slot's
    attempts run one after another (the record file's start and end, a killed process
    until the suite last saw it alive; its journal intervals are too short to tell)."""
    edges: list[tuple[float, int]] = []
    ends = {(e.run_id, e.task, e.attempt): e.at for e in seen.executions if e.kind == "end"}
    for e in seen.executions:
        if e.kind != "start" or not e.task.startswith(LANE_PREFIX):
            continue
        end = ends.get((e.run_id, e.task, e.attempt)) or seen.seen_until(e.pid, e.at) or e.at
        edges += [(e.at, 1), (end, -1)]
    edges.sort()
    most = now_open = 0
    for _, step in edges:
        now_open += step
        most = max(most, now_open)
    return Check("lane limit never exceeded", most <= LANE_LIMIT,
                 f"at most {most} of {LANE_LIMIT} running, {len(edges) // 2} executions",
                 [] if most <= LANE_LIMIT else [f"{most} lane tasks ran at once"])


def _most_active(seen: Observed, holds: Callable[[str], bool]) -> tuple[int, int]:
    """The most attempts ACTIVE at once of the tasks ``holds`` picks, and how many."""
    edges: list[tuple[datetime, int]] = []
    opened: dict[object, datetime] = {}  # by run and task: a task has one current attempt
    for run_id, task, _, at, old, new, _ in seen.record.journal:
        if task is None or not holds(task):
            continue
        if new == "ACTIVE":
            opened[run_id, task] = at
        elif old == "ACTIVE" and (run_id, task) in opened:
            edges += [(opened.pop((run_id, task)), 1), (at, -1)]
    edges.sort(key=lambda edge: (edge[0], edge[1]))
    most = now_open = 0
    for _, step in edges:
        now_open += step
        most = max(most, now_open)
    return most, len(edges) // 2


def check_flow_released(seen: Observed) -> Check:
    """Every flow slot released and no attempt left waiting, at quiescence."""
    slots, waiting = seen.record.flow_left
    ok = slots == 0 and waiting == 0
    return Check("flow slots released", ok, f"{slots} slots held, {waiting} waiting",
                 [] if ok else [f"{slots} slots and {waiting} waits left after quiescence"])


def expected_events(record: Record) -> Counter[EventKey]:
    """The events the journal's state changes must have caused (docs/architecture.md, "Events")."""
    out: Counter[EventKey] = Counter()
    for run, task, attempt, _, old, new, _ in record.journal:
        previous = old or None
        if task is not None:
            out[(f"task.{new.lower()}", run, task, attempt, new, previous)] += 1
            continue
        for name in _run_event_names(old, new):
            out[(name, run, None, None, new, previous)] += 1
    return out


def _run_event_names(old: str, new: str) -> list[str]:
    if new == "READY" and not old:
        return ["run.scheduled"]
    if new == "ACTIVE":
        return ["run.started" if old == "READY" else "run.resumed"]
    name = RUN_EVENTS.get(new)
    if name is None:
        return []
    return [name, "run.done"] if new in TERMINAL else [name]


def delivered_events(deliveries: list[Delivery]) -> Counter[EventKey]:
    """The events the webhook got, each event id counted once."""
    by_id = {d.event_id: d for d in deliveries}
    return Counter((d.event, d.run_id or "", d.task, d.attempt if d.task else None,
                    d.state or "", d.previous) for d in by_id.values())


def undelivered(record: Record, deliveries: list[Delivery]) -> int:
    """How many of the journal's events the webhook has not got (yet)."""
    return sum((expected_events(record) - delivered_events(deliveries)).values())


def check_webhook(seen: Observed) -> Check:
    """Every state change in the journal reached the webhook at least once."""
    expected = expected_events(seen.record)
    copies = Counter(d.event_id for d in seen.deliveries)
    got = delivered_events(seen.deliveries)
    missing = expected - got
    doubled = Counter({k: n for k, n in (got - expected).items() if k in expected})
    repeats = sum(n - 1 for n in copies.values())
    evidence = [f"{k[0]} run {k[1]} task {k[2]} attempt {k[3]} ({k[5]} -> {k[4]}) "
                f"never delivered" for k in missing]
    evidence += [f"{k[0]} run {k[1]} task {k[2]} attempt {k[3]} published {n}x more than "
                 "journaled" for k, n in doubled.items()]
    figures = (f"{sum(expected.values())} expected, {sum(missing.values())} missing; "
               f"{len(seen.deliveries)} POSTs, {repeats} repeats of an event id, "
               f"{sum(doubled.values())} doubled changes, {seen.bad_signatures} bad signatures")
    return Check("every state change delivered", not missing and not seen.bad_signatures,
                 figures, evidence)


def check_exits(seen: Observed) -> Check:
    """No component exited on its own, so none crash-looped."""
    unexpected = [e for e in seen.exits if not e.expected]
    per: dict[str, list[float]] = defaultdict(list)
    for e in unexpected:
        per[e.name].append(e.at)
    loops = [name for name, times in per.items()
             if any(sum(1 for u in times if t <= u < t + CRASH_LOOP_WINDOW_S)
                    >= CRASH_LOOP_EXITS for t in times)]
    evidence = [f"{e.name} exited {e.code} at {_hms(e.at)}: {e.tail[:300]}" for e in unexpected]
    figures = (f"{len(unexpected)} unexpected exits ("
               + (", ".join(f"{n} {len(t)}x" for n, t in sorted(per.items())) or "none")
               + f"); crash loops: {', '.join(loops) or 'none'}")
    return Check("no unexpected exit or crash loop", not unexpected, figures, evidence)


MEASURES = {
    "requeue": "its ACTIVE attempts requeued, from the fault",
    "change": "first task state change a worker reported, after the restart / server back",
    "held": "the killed engine's taken messages applied (their batch committed), after the restart",
    "webhook": "first webhook delivery after the restart",
    "storm": "storm run finished, from its submission",
}


def check_recoveries(faults: list[Fault]) -> list[Check]:
    """One row per fault: its recovery time against the issue's target."""
    rows = []
    for fault in faults:
        value = fault.recovery
        target = fault.target_s
        ok = value is not None and (target is None or value <= target)
        shown = "never" if value is None else f"{value:.1f} s"
        limit = "" if target is None else f" (target {target:.0f} s)"
        rows.append(Check(f"recovery: {fault.kind} at {fault.started}", ok,
                          f"{shown}{limit}: {MEASURES[fault.measure]}; {fault.detail}",
                          fault.notes))
    return rows


def recovery_summary(faults: list[Fault]) -> list[str]:
    """p50 / max recovery per fault kind injected more than once."""
    per: dict[str, list[float | None]] = defaultdict(list)
    for fault in faults:
        per[fault.kind].append(fault.recovery)
    lines = []
    for kind, values in per.items():
        known = sorted(v for v in values if v is not None)
        if len(values) > 1 and known:
            lines.append(f"{kind}: {len(values)} faults, recovery p50 "
                         f"{known[len(known) // 2]:.1f} s, max {known[-1]:.1f} s"
                         + (f", {len(values) - len(known)} never" if len(known) < len(values)
                            else ""))
    return lines


def _hms(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S.%f")[:-3]


def render(checks: list[Check]) -> str:
    """The checks as a Markdown table, then the evidence of each failure."""
    lines = ["| check | result | figures |", "|---|---|---|"]
    lines += [f"| {c.name} | {'pass' if c.ok else 'FAIL'} | {c.figures} |" for c in checks]
    for check in checks:
        if not check.ok and check.evidence:
            lines.append(f"\n{check.name}: {len(check.evidence)} cases, e.g.")
            lines += [f"  - {line}" for line in check.evidence[:EVIDENCE_LINES]]
    return "\n".join(lines)
