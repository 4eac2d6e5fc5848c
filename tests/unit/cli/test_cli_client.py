"""The client commands against a real local HTTP server serving canned JSON."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner, Result

from scheduler.cli.main import build_app

RUN_ID = "5d1c0a52-0000-4000-8000-000000000001"
JOB_ID = "5d1c0a52-0000-4000-8000-0000000000aa"
RUN_PATH = f"/api/v1/runs/{RUN_ID}"


def a_run(state: str, *task_states: str) -> dict[str, Any]:
    names = ["extract", "transform", "load"]
    tasks: list[dict[str, Any]] = [
        {
            "id": f"t{i}",
            "name": names[i],
            "type": "shell" if i else "noop",
            "state": s,
            "attempt": 1,
            "worker": "worker@laptop" if s != "WAITING" else None,
            "output": {},
            "message": "exit status 2" if s == "FAILED" else None,
            "started_at": "2025-03-01T10:00:00+00:00" if s != "WAITING" else None,
            "finished_at": "2025-03-01T10:00:05+01:00" if s in ("COMPLETED", "FAILED") else None,
        }
        for i, s in enumerate(task_states)
    ]
    progress: dict[str, int] = {}
    for s in task_states:
        progress[s] = progress.get(s, 0) + 1
    return {"id": RUN_ID, "job_id": JOB_ID, "number": 1, "state": state,
            "progress": progress, "tasks": tasks}  # fmt: skip


def stellwerk(api_url: str, *args: str, token: str | None = "t0k3n", columns: int = 200) -> Result:
    options = ["--api-url", api_url] + (["--token", token] if token else [])
    return CliRunner().invoke(build_app(), [*args, *options], env={"COLUMNS": str(columns)})


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No token or URL from the environment; times shown in UTC; a fresh working dir."""
    for name in ("STELLWERK_TOKEN", "STELLWERK_API_URL", "STELLWERK_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_show_prints_the_run_and_a_table_of_its_tasks(canned_api: Any) -> None:
    canned_api.reply("GET", RUN_PATH, (200, a_run("FAILED", "COMPLETED", "FAILED", "CANCELED")))

    result = stellwerk(canned_api.url, "show", RUN_ID)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert RUN_ID in lines[0] and "FAILED" in lines[0] and "3/3 finished" in lines[0]
    header = next(line for line in lines if "name" in line and "attempt" in line)
    for column in ("type", "state", "worker", "started", "finished", "message"):
        assert column in header
    transform = next(line for line in lines if "transform" in line)
    for cell in ("shell", "FAILED", "worker@laptop", "2025-03-01 10:00:00",
                 "2025-03-01 09:00:05", "exit status 2"):  # fmt: skip
        assert cell in transform
    assert canned_api.calls("GET", RUN_PATH)[0]["headers"]["Authorization"] == "Bearer t0k3n"


def test_show_reports_the_problem_detail_in_one_line(canned_api: Any) -> None:
    problem = {"title": "Not Found", "status": 404, "detail": f"run {RUN_ID} not found"}
    canned_api.reply("GET", RUN_PATH, (404, problem))

    result = stellwerk(canned_api.url, "show", RUN_ID)

    assert result.exit_code == 1
    assert result.output.strip() == f"error: 404 run {RUN_ID} not found"


def test_watch_polls_until_the_run_completes_and_exits_0(canned_api: Any) -> None:
    canned_api.reply(
        "GET",
        RUN_PATH,
        (200, a_run("ACTIVE", "ACTIVE", "WAITING", "WAITING")),
        (200, a_run("ACTIVE", "COMPLETED", "ACTIVE", "WAITING")),
        (200, a_run("COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED")),
    )

    result = stellwerk(canned_api.url, "watch", RUN_ID)

    assert result.exit_code == 0, result.output
    assert len(canned_api.calls("GET", RUN_PATH)) == 3
    assert "3/3 tasks" in result.output


def test_watch_exits_1_when_the_run_fails(canned_api: Any) -> None:
    canned_api.reply("GET", RUN_PATH, (200, a_run("FAILED", "COMPLETED", "FAILED", "CANCELED")))

    result = stellwerk(canned_api.url, "watch", RUN_ID)

    assert result.exit_code == 1
    assert "FAILED" in result.output


def test_submit_posts_the_yaml_spec_and_prints_job_and_run(canned_api: Any, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: nightly\ntasks:\n  - name: hello\n    type: noop\n")
    created = {"id": JOB_ID, "name": "nightly", "state": "READY", "run_id": RUN_ID}
    canned_api.reply("POST", "/api/v1/jobs", (201, created))

    result = stellwerk(canned_api.url, "submit", str(spec))

    assert result.exit_code == 0, result.output
    assert JOB_ID in result.output and RUN_ID in result.output
    body = canned_api.calls("POST", "/api/v1/jobs")[0]["body"]
    assert body == {"name": "nightly", "tasks": [{"name": "hello", "type": "noop"}]}


def test_submit_watch_follows_the_run(canned_api: Any, tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text('{"name": "once", "tasks": [{"name": "a", "type": "noop"}]}')
    created = {"id": JOB_ID, "name": "once", "state": "READY", "run_id": RUN_ID}
    canned_api.reply("POST", "/api/v1/jobs", (201, created))
    canned_api.reply("GET", RUN_PATH, (200, a_run("COMPLETED", "COMPLETED")))

    result = stellwerk(canned_api.url, "submit", str(spec), "--watch")

    assert result.exit_code == 0, result.output
    assert "1/1 tasks" in result.output


def test_submit_shows_validation_errors_of_the_api(canned_api: Any, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: bad\ntasks:\n  - {name: a, type: noop, next: [b]}\n")
    problem = {"title": "Unprocessable", "status": 422, "detail": [
        {"loc": ["body", "tasks"], "msg": "task 'a' names unknown successor 'b'"}]}  # fmt: skip
    canned_api.reply("POST", "/api/v1/jobs", (422, problem))

    result = stellwerk(canned_api.url, "submit", str(spec))

    assert result.exit_code == 1
    assert result.output.strip() == "error: 422 tasks: task 'a' names unknown successor 'b'"


def test_submit_of_broken_yaml_says_where_in_one_line_and_sends_nothing(
    canned_api: Any, tmp_path: Path
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: broken\ntasks: [\n  - name: a\n")

    result = stellwerk(canned_api.url, "submit", str(spec))

    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith(f"error: {spec}: invalid YAML at line ")
    assert canned_api.requests == []


def test_without_a_token_the_admin_token_of_the_data_dir_is_used(
    canned_api: Any, tmp_path: Path
) -> None:
    (tmp_path / ".stellwerk").mkdir()
    (tmp_path / ".stellwerk" / "admin-token").write_text("from-up\n")
    canned_api.reply("GET", RUN_PATH, (200, a_run("ACTIVE", "ACTIVE")))

    result = stellwerk(canned_api.url, "show", RUN_ID, token=None)

    assert result.exit_code == 0, result.output
    assert canned_api.calls("GET", RUN_PATH)[0]["headers"]["Authorization"] == "Bearer from-up"


def test_an_unreachable_api_is_one_line(tmp_path: Path) -> None:
    result = stellwerk("http://127.0.0.1:9", "show", RUN_ID)

    assert result.exit_code == 1
    assert result.output.startswith("error: cannot reach the API at http://127.0.0.1:9/api/v1")
    assert len(result.output.strip().splitlines()) == 1


# -- every client command: the connection options, and failures as one line

# Commands that are no REST client: the components, ``up``, and the container health
# check (it reads Redis and PostgreSQL). Any other command talks to the API.
NOT_CLIENTS = {"api", "engine", "beat", "notify", "worker", "connector", "migrate",
               "healthcheck", "up"}
# Named so that a client command renamed or dropped is noticed, not silently unchecked.
CLIENTS = {"submit", "jobs", "runs", "show", "watch", "logs", "cancel", "pause", "resume",
           "retry", "confirm", "reject", "skip", "run-now", "token create", "token list",
           "token revoke", "job commit", "job enable", "job disable", "job delete",
           "limit list", "limit set", "limit delete", "prune", "fire-times",
           "subscription list", "subscription create", "subscription delete", "events",
           "apply"}


def leaf_commands(command: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``("job enable", command)`` for each command that runs something, groups walked."""
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    for name, sub in subcommands.items():
        yield from leaf_commands(sub, f"{path} {name}".strip())


def test_every_client_command_takes_api_url_and_token() -> None:
    commands = dict(leaf_commands(typer.main.get_command(build_app())))
    clients = {name: c for name, c in commands.items() if name not in NOT_CLIENTS}

    assert set(clients) >= CLIENTS
    assert set(commands) >= NOT_CLIENTS
    missing = {name: sorted({"--api-url", "--token"} - {o for p in c.params for o in p.opts})
               for name, c in clients.items()}
    assert {name: lacks for name, lacks in missing.items() if lacks} == {}


CLIENT_CALLS = [
    ["submit", "job.yaml"], ["jobs"], ["runs", JOB_ID], ["show", RUN_ID], ["watch", RUN_ID],
    ["logs", RUN_ID, "load"], ["logs", RUN_ID, "load", "--follow"], ["cancel", RUN_ID],
    ["pause", RUN_ID], ["resume", RUN_ID], ["retry", RUN_ID, "--task", "load"],
    ["confirm", RUN_ID, "--task", "load"], ["reject", RUN_ID, "--task", "load"],
    ["skip", RUN_ID, "--task", "load"], ["run-now", JOB_ID], ["job", "commit", JOB_ID],
    ["job", "enable", JOB_ID], ["job", "disable", JOB_ID], ["job", "delete", JOB_ID, "--force"],
    ["token", "create", "--name", "ci", "--scope", "job.read"], ["token", "list"],
    ["token", "revoke", JOB_ID], ["limit", "list"], ["limit", "set", "type:render", "10"],
    ["limit", "delete", "type:render"], ["prune", "--older-than", "7d"],
    ["fire-times", JOB_ID], ["subscription", "list"],
    ["subscription", "create", "--event", "run.*", "--celery-task", "t", "--job", "nightly"],
    ["subscription", "delete", JOB_ID], ["events"], ["events", "--run", RUN_ID],
]
HINT = "is `stellwerk up` running? Elsewhere pass --api-url or set STELLWERK_API_URL"


def failed_in_one_line(result: Result) -> str:
    """The one line a failed command printed; no traceback, no exception escaped."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    return line


@pytest.mark.parametrize("args", [*CLIENT_CALLS, ["apply", "job.yaml"]], ids=" ".join)
def test_a_client_command_against_an_unreachable_api_fails_in_one_line(
    args: list[str], tmp_path: Path,
) -> None:
    (tmp_path / "job.yaml").write_text("name: n\ntasks:\n  - {name: a, type: noop}\n")

    line = failed_in_one_line(stellwerk("http://127.0.0.1:9", *args))

    assert line.startswith("error: cannot reach the API at http://127.0.0.1:9/api/v1/: ")
    assert line.endswith(f"(the URL is --api-url's); {HINT}")


@pytest.mark.parametrize("args", CLIENT_CALLS, ids=" ".join)
def test_a_client_command_answered_404_fails_in_one_line(
    args: list[str], canned_api: Any, tmp_path: Path,
) -> None:
    (tmp_path / "job.yaml").write_text("name: n\ntasks:\n  - {name: a, type: noop}\n")

    line = failed_in_one_line(stellwerk(canned_api.url, *args))  # no route: 404 for all

    assert line.startswith("error: 404 no route /api/v1/")
    assert canned_api.requests, "the command sent nothing"
