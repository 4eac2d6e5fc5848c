"""Jobs as Python code, applied with ``stellwerk apply module:attr`` (issue 17).

    from stellwerk.sdk import Job

    nightly = Job("nightly", schedule={"cron": "30 2 * * *", "timezone": "Europe/Berlin"})
    fetch = nightly.task("fetch", "http", params={"url": "https://example.org/export"})
    load = nightly.task("load", "shell", params={"argv": ["./load.sh"]}, retries=2)
    fetch >> load                      # load runs after fetch

``stellwerk apply jobs:nightly`` (a module on the path and an attribute of it: a
:class:`Job`, a list of them, or a function returning either) applies it like a spec
file: created by name, or changed where it differs, or left alone. :meth:`Job.spec` is
the spec the REST API takes, so ``PUT /jobs/{name}`` takes it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Task:
    """One task of a job: its name, type, params and settings (docs/job-spec.md)."""

    name: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    next: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def __rshift__(self, other: Task | Sequence[Task]) -> Task | Sequence[Task]:
        """``a >> b`` (or ``a >> [b, c]``): the others run after this one."""
        for task in [other] if isinstance(other, Task) else other:
            if task.name not in self.next:
                self.next.append(task.name)
        return other

    def spec(self) -> dict[str, Any]:
        """The task as a job spec writes it."""
        return {"name": self.name, "type": self.type, "params": self.params,
                "next": list(self.next), **self.settings}


@dataclass
class Job:
    """A job: its name, its settings (``schedule``, ``params``, ``labels``...) and tasks."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)

    def __init__(self, name: str, *, tasks: Iterable[Task] = (), **settings: Any) -> None:
        self.name = name
        self.settings = settings
        self.tasks = list(tasks)

    def task(
        self, name: str, type: str, *, params: dict[str, Any] | None = None,  # noqa: A002
        after: Iterable[Task] = (), **settings: Any,
    ) -> Task:
        """Add a task (after ``after``, if given) and return it."""
        if any(task.name == name for task in self.tasks):
            raise ValueError(f"job {self.name!r} has a task named {name!r} already")
        task = Task(name, type, dict(params or {}), settings=settings)
        for before in after:
            before >> task
        self.tasks.append(task)
        return task

    def spec(self) -> dict[str, Any]:
        """The job spec the REST API takes (``POST /jobs``, ``PUT /jobs/{name}``)."""
        return {"name": self.name, **self.settings, "tasks": [t.spec() for t in self.tasks]}


def jobs_of(value: object) -> list[Job]:
    """The jobs ``value`` holds: a job, a list of them, or a function returning either."""
    if callable(value) and not isinstance(value, Job):
        value = value()
    if isinstance(value, Job):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | dict):
        jobs = list(value)
        if jobs and all(isinstance(job, Job) for job in jobs):
            return jobs
    raise TypeError(f"expected a stellwerk.sdk.Job, a list of them or a function "
                    f"returning either, got {type(value).__name__}")
