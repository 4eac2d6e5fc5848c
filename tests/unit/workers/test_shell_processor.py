import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import psutil
import pytest

from workers.builtin.shell import shell
from workers.context import TaskContext
from workers.outcomes import Completed, Failed

PY = sys.executable


def run(argv: list[str], **params: object) -> tuple[Completed | Failed, TaskContext]:
    ctx = TaskContext(params={"argv": argv, **params})
    return shell(ctx), ctx


def lines(ctx: TaskContext) -> list[tuple[str, str]]:
    return [(entry.stream, entry.line) for entry in ctx.logs.drain()]


def test_the_environment_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FROM_WORKER", "inherited")
    monkeypatch.setenv("STELLWERK_SECRET_KEY", "do-not-leak")
    start = datetime(2024, 5, 1, 8, 30, tzinfo=UTC)
    ctx = TaskContext(
        job_id=UUID(int=1),
        run_id=UUID(int=2),
        task_run_id=UUID(int=3),
        tenant="acme",
        task="dump",
        attempt=2,
        job_params={"db": "main"},
        job_secure_params={"pw": "hunter2"},
        storage={"cursor": 41},
        last_success_start=start,
        params={
            "argv": [PY, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
            "env": {"EXTRA": "yes", "JOB_ID": "spoofed"},
        },
    )
    assert shell(ctx) == Completed({"exit_code": 0})
    env = json.loads(ctx.logs.drain()[0].line.replace("***", "hunter2"))
    assert env["JOB_ID"] == str(UUID(int=1))
    assert env["RUN_ID"] == str(UUID(int=2))
    assert env["TENANT_ID"] == "acme"
    assert json.loads(env["JOB_PARAMS"]) == {"db": "main"}
    assert json.loads(env["JOB_SECURE_PARAMS"]) == {"pw": "hunter2"}
    assert json.loads(env["JOB_STORAGE"]) == {"cursor": 41}
    assert env["LAST_SUCCESS_START"] == "2024-05-01T08:30:00+00:00"
    assert env["LAST_SUCCESS_FINISH"] == ""
    assert env["TASK_NAME"] == "dump"
    assert env["ATTEMPT"] == "2"
    assert env["IDEMPOTENCY_KEY"] == f"{UUID(int=3)}:2"
    assert env["EXTRA"] == "yes"
    assert env["FROM_WORKER"] == "inherited"
    assert "STELLWERK_SECRET_KEY" not in env


def test_stdout_and_stderr_lines_are_the_log_without_added_text() -> None:
    script = (
        "import sys\n"
        "print('out 1', flush=True)\n"
        "print('err 1', file=sys.stderr, flush=True)\n"
        "print('out 2')\n"
    )
    outcome, ctx = run([PY, "-c", script])
    assert outcome == Completed({"exit_code": 0})
    captured = lines(ctx)
    assert [line for line in captured if line[0] == "stdout"] == [
        ("stdout", "out 1"),
        ("stdout", "out 2"),
    ]
    assert [line for line in captured if line[0] == "stderr"] == [("stderr", "err 1")]


def test_a_non_zero_exit_code_is_a_failure() -> None:
    outcome, _ = run([PY, "-c", "raise SystemExit(3)"])
    assert outcome == Failed("exit code 3", {"exit_code": 3})


def test_argv_is_not_parsed_by_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    outcome, ctx = run([PY, "-c", "import sys; print(sys.argv[1])", f"; touch {marker}"])
    assert outcome == Completed({"exit_code": 0})
    assert lines(ctx) == [("stdout", f"; touch {marker}")]
    assert not marker.exists()


def test_cwd_is_honoured(tmp_path: Path) -> None:
    outcome, ctx = run([PY, "-c", "import os; print(os.getcwd())"], cwd=str(tmp_path))
    assert outcome == Completed({"exit_code": 0})
    assert lines(ctx) == [("stdout", str(tmp_path))]


def test_save_job_storage_last_line_wins_and_bad_json_is_logged() -> None:
    script = (
        "print('[saveJobStorage] {\"cursor\": 1}')\n"
        "print('[saveJobStorage] {not json')\n"
        "print('[saveJobStorage] [1, 2]')\n"
        'print(\'[saveJobStorage] {"cursor": 2, "when": "2024-01-16T14:48:32Z"}\')\n'
    )
    outcome, ctx = run([PY, "-c", script])
    assert outcome == Completed({"exit_code": 0})
    assert ctx.saved_storage == {"cursor": 2, "when": "2024-01-16T14:48:32Z"}
    notes = [line for stream, line in lines(ctx) if stream == "log"]
    assert len(notes) == 2
    assert "not JSON" in notes[0]
    assert "not a JSON object" in notes[1]


def test_no_save_line_saves_nothing() -> None:
    _, ctx = run([PY, "-c", "print('hello')"])
    assert ctx.saved_storage is None


def test_secure_values_are_masked_in_the_output() -> None:
    ctx = TaskContext(
        secure_params={"password": "hunter22"},
        params={
            "argv": [PY, "-c", "import os; print('pw=' + os.environ['PW'])"],
            "env": {"PW": "hunter22"},
        },
    )
    shell(ctx)
    assert lines(ctx) == [("stdout", "pw=***")]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, "params.argv: Field required"),
        ({"argv": "ls -l"}, "params.argv: Input should be a valid list"),
        ({"argv": ["ls", 3]}, "params.argv.1: Input should be a valid string"),
        ({"argv": []}, "params.argv: List should have at least 1 item"),
        ({"argv": ["ls"], "env": {"A": 1}}, "params.env.A: Input should be a valid string"),
    ],
)
def test_bad_params_fail_with_a_clear_message(params: dict[str, object], expected: str) -> None:
    outcome = shell(TaskContext(params=params))
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("invalid shell params: ")
    assert expected in outcome.message


def test_a_missing_executable_fails_clearly() -> None:
    outcome, _ = run(["/nonexistent/stellwerk-test-binary"])
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("cannot start '/nonexistent/stellwerk-test-binary'")


def test_cancel_stops_the_process_and_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    ctx = TaskContext(params={"argv": [PY, "-c", script]})
    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(shell(ctx)))
    began = time.monotonic()
    runner.start()
    _wait_for(pid_file.exists)
    ctx.cancel()
    runner.join(30)
    assert not runner.is_alive()
    assert time.monotonic() - began < 30  # generous: the script sleeps 60 s
    outcome = result[0]
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("canceled")
    assert outcome.output == {"exit_code": -15}
    _wait_for(lambda: not _alive(int(pid_file.read_text())))
    assert ("stdout", "started") in lines(ctx)


def test_a_process_ignoring_sigterm_is_killed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("workers.builtin.shell.TERM_GRACE_S", 0.3)
    ready = tmp_path / "ready"
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    ctx = TaskContext(params={"argv": [PY, "-c", script]})

    def cancel_when_ready() -> None:
        _wait_for(ready.exists)
        ctx.cancel()

    canceller = threading.Thread(target=cancel_when_ready)
    canceller.start()
    outcome = shell(ctx)
    canceller.join()
    assert outcome == Failed("canceled: exit code -9", {"exit_code": -9})
    assert any("SIGKILL" in line for _, line in lines(ctx))


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
