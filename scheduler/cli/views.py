"""Rich renderings of a run as ``GET /runs/{id}`` returns it: header, progress, task table."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from common.domain.states import RUN_TERMINAL, TASK_TERMINAL
from scheduler.cli.tables import FittedTable, LeaveOut, Squeeze

STATE_STYLES = {
    "COMPLETED": "green",
    "FAILED": "bold red",
    "TIMEOUT": "bold red",
    "REJECTED": "red",
    "CANCELED": "yellow",
    "CANCEL_REQUESTED": "yellow",
    "SOFT_FAILED": "yellow",
    "PAUSED": "yellow",
    "PAUSE_REQUESTED": "yellow",
    "CONFIRM": "magenta",
    "ACTIVE": "cyan",
    "READY": "blue",
    "WAITING": "dim",
    "SKIPPED": "dim",
    "NEW": "dim",
}


def run_is_over(run: dict[str, Any]) -> bool:
    """Whether the run is in a terminal state (COMPLETED, FAILED, TIMEOUT, CANCELED)."""
    return str(run.get("state")) in RUN_TERMINAL


def task_counts(run: dict[str, Any]) -> Counter[str]:
    """Tasks per state: the run's ``progress`` if it has one, else counted from its tasks."""
    progress = run.get("progress")
    if isinstance(progress, dict) and progress:
        return Counter({str(k): int(v) for k, v in progress.items()})
    return Counter(str(task.get("state")) for task in run.get("tasks", ()))


def finished_of_total(run: dict[str, Any]) -> tuple[int, int]:
    """(tasks in a terminal state, all tasks)."""
    counts = task_counts(run)
    finished = sum(n for state, n in counts.items() if state in TASK_TERMINAL)
    return finished, sum(counts.values())


def state_text(state: object) -> Text:
    """A state name in its colour."""
    name = str(state or "")
    return Text(name, style=STATE_STYLES.get(name, ""))


def run_header(run: dict[str, Any]) -> Text:
    """``run <id>  STATE  3/5 finished`` over ``job <id>  #<n>  COMPLETED 3, ACTIVE 2``."""
    finished, total = finished_of_total(run)
    counts = ", ".join(f"{state} {n}" for state, n in sorted(task_counts(run).items()) if n)
    header = Text.assemble(("run ", "bold"), (str(run.get("id", "?")), "bold"), "  ")
    header.append_text(state_text(run.get("state")))
    header.append(f"  {finished}/{total} finished\n")
    header.append(f"job {run.get('job_id', '?')}  #{run.get('number', '?')}  {counts}", "dim")
    return header


def progress_line(run: dict[str, Any]) -> Table:
    """A progress bar of finished tasks over all tasks, with the count beside it."""
    finished, total = finished_of_total(run)
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        ProgressBar(total=max(total, 1), completed=finished, width=40),
        Text(f"{finished}/{total} tasks"),
    )
    return grid


def task_table(run: dict[str, Any]) -> FittedTable:
    """One row per task: name, type, state, attempt, worker, started, finished, message."""
    # On a narrow terminal the message gives way first (it wraps in words), then the times
    # (date over time) and the name; then the times are left out, and only then does the
    # worker wrap, so a worker name of the usual length stays whole at 80 columns.
    table = FittedTable(
        ("name", "type", "state", "attempt", "worker", "started", "finished", "message"),
        give_way=(
            Squeeze("message", 12), Squeeze("started", 10), Squeeze("finished", 10),
            Squeeze("name", 8), LeaveOut("finished"), LeaveOut("started"), Squeeze("worker", 12),
        ),
        right=("attempt",),
    )
    today = datetime.now(UTC).astimezone().date()
    for task in run.get("tasks", ()):
        table.add_row(
            str(task.get("name", "")),
            str(task.get("type", "")),
            state_text(task.get("state")),
            str(task.get("attempt", "")),
            str(task.get("worker") or ""),
            format_time(task.get("started_at"), today),
            format_time(task.get("finished_at"), today),
            str(task.get("message") or task.get("waiting_for") or ""),
        )
    return table


def run_view(run: dict[str, Any], *, with_bar: bool = False) -> RenderableType:
    """The header and the task table, with a progress bar between them for ``watch``."""
    parts: list[RenderableType] = [run_header(run)]
    if with_bar:
        parts.append(progress_line(run))
    parts.append(task_table(run))
    return Group(*parts)


def format_time(value: object, today: date) -> str:
    """An API timestamp in local time: ``10:00:03`` today, else ``2025-01-31 10:00:03``."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.tzinfo is None:  # the API sends offsets; if not, it is UTC
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone()
    return local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M:%S")
