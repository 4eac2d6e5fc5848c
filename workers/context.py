"""What a processor gets: the attempt it runs, its inputs, a log, and ways to talk back.

A ``TaskContext`` is plain data plus three channels (log, cancel flag, saved storage),
so a processor can be unit-tested by building one by hand: ``TaskContext(params={...})``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from common.messaging.keys import attempt_key
from common.messaging.messages import TaskDispatch, utcnow
from workers.tasklog import LogStream, TaskLog, secret_strings


@dataclass(eq=False, kw_only=True)
class TaskContext:
    """One attempt of one task, as its processor sees it."""

    run_id: UUID = field(default_factory=uuid4)
    job_id: UUID = field(default_factory=uuid4)
    job_name: str = ""
    tenant: str = ""
    task_run_id: UUID = field(default_factory=uuid4)
    task: str = ""
    type: str = ""
    attempt: int = 1
    params: dict[str, Any] = field(default_factory=dict)
    secure_params: dict[str, Any] = field(default_factory=dict, repr=False)
    job_params: dict[str, Any] = field(default_factory=dict)
    job_secure_params: dict[str, Any] = field(default_factory=dict, repr=False)
    storage: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 12 * 3600.0
    last_success_start: datetime | None = None
    last_success_finish: datetime | None = None
    clock: Callable[[], datetime] = field(default=utcnow, repr=False)
    logs: TaskLog = field(init=False, repr=False)
    _cancel: threading.Event = field(init=False, repr=False, default_factory=threading.Event)
    _saved_storage: dict[str, Any] | None = field(init=False, repr=False, default=None)
    _on_heartbeat: Callable[[], None] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        """Mask every secure string in the captured log."""
        secrets = secret_strings(self.secure_params, self.job_secure_params)
        self.logs = TaskLog(secrets=secrets, clock=self.clock)

    @classmethod
    def from_dispatch(
        cls, dispatch: TaskDispatch, clock: Callable[[], datetime] = utcnow
    ) -> TaskContext:
        """The context of the attempt a dispatch message asks for."""
        return cls(
            run_id=dispatch.run_id,
            job_id=dispatch.job_id,
            job_name=dispatch.job_name,
            tenant=dispatch.tenant,
            task_run_id=dispatch.task_run_id,
            task=dispatch.task,
            type=dispatch.type,
            attempt=dispatch.attempt,
            params=dispatch.params,
            secure_params=dispatch.secure_params,
            job_params=dispatch.job_params,
            job_secure_params=dispatch.job_secure_params,
            storage=dispatch.storage,
            timeout_s=dispatch.timeout_s,
            last_success_start=dispatch.last_success_start,
            last_success_finish=dispatch.last_success_finish,
            clock=clock,
        )

    @property
    def idempotency_key(self) -> str:
        """``<task run id>:<attempt>``: send it along with side effects to make them once-only."""
        return attempt_key(self.task_run_id, self.attempt)

    @property
    def label(self) -> str:
        """``run <id> task <name> attempt <n>``: what every worker log line about it says."""
        return attempt_label(self.run_id, self.task, self.attempt)

    def log(self, line: str, stream: LogStream = "log") -> None:
        """Append one line to the task log (timestamped; secure values masked)."""
        self.logs.append(line, stream)

    def heartbeat(self) -> None:
        """Report progress now (the captured log so far) instead of at the next interval."""
        if self._on_heartbeat is not None:
            self._on_heartbeat()

    @property
    def cancelled(self) -> bool:
        """Whether the engine asked this attempt to stop, or its timeout passed."""
        return self._cancel.is_set()

    def wait_cancelled(self, timeout_s: float | None = None) -> bool:
        """Block until cancelled or ``timeout_s`` passed; return whether cancelled."""
        return self._cancel.wait(timeout_s)

    def cancel(self) -> None:
        """Ask the processor to stop (used by the runtime; processors just check the flag)."""
        self._cancel.set()

    def save_storage(self, storage: dict[str, Any]) -> None:
        """Keep ``storage`` as the job storage for the next run (the last save wins)."""
        if not isinstance(storage, dict):
            raise TypeError(f"job storage must be a JSON object, not {type(storage).__name__}")
        self._saved_storage = dict(storage)

    @property
    def saved_storage(self) -> dict[str, Any] | None:
        """What the processor saved, or None if it saved nothing."""
        return self._saved_storage

    def on_heartbeat(self, callback: Callable[[], None] | None) -> None:
        """Let the runtime hear :meth:`heartbeat` calls."""
        self._on_heartbeat = callback


def attempt_label(run_id: UUID, task: str, attempt: int) -> str:
    """How worker log lines name an attempt."""
    return f"run {run_id} task {task!r} attempt {attempt}"
