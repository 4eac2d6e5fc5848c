"""Secure values are masked in everything a task reports: log lines, message, output."""

import json
import sys

from workers.builtin.shell import shell
from workers.context import TaskContext
from workers.outcomes import Completed
from workers.tasklog import TaskLog, secret_strings

PY = sys.executable


def test_strings_and_numbers_of_four_or_more_characters_are_masked() -> None:
    log = TaskLog(secrets=secret_strings({"pw": "s3cret", "pin": 4711, "rate": 12.75,
                                          "short": 123, "flag": True, "none": None}))
    log.append("pw s3cret pin 4711 rate 12.75 short 123 flag True")
    (entry,) = log.drain()
    assert entry.line == "pw *** pin *** rate *** short 123 flag True"


def test_the_json_escaped_form_of_a_secret_is_masked_too() -> None:
    secret = 'quo"te\\back-ü'
    log = TaskLog(secrets=secret_strings({"pw": secret}))
    log.append(json.dumps({"pw": secret}))
    log.append(f"raw {secret}")
    assert [entry.line for entry in log.drain()] == ['{"pw": "***"}', "raw ***"]


def test_a_secret_containing_another_is_masked_whole() -> None:
    log = TaskLog(secrets=secret_strings(["abcd", "abcdefgh"]))
    log.append("abcdefgh abcd")
    assert log.drain()[0].line == "*** ***"


def test_outputs_are_masked_deeply() -> None:
    log = TaskLog(secrets=secret_strings({"token": "tok-123456"}))
    output = {"a": "x tok-123456 y", "b": [{"c": "tok-123456"}], "n": 5, "t": True}
    assert log.mask_value(output) == {"a": "x *** y", "b": [{"c": "***"}], "n": 5, "t": True}


def test_a_shell_task_printing_its_secure_params_logs_them_masked() -> None:
    script = (
        "import os; print(os.environ['JOB_SECURE_PARAMS']); "
        "print(os.environ['TASK_SECURE_PARAMS']); "
        "import json, sys; t = json.loads(os.environ['TASK_SECURE_PARAMS']); "
        "print('token', t['token'], 'pin', t['pin'], file=sys.stderr)"
    )
    ctx = TaskContext(
        params={"argv": [PY, "-c", script]},
        job_secure_params={"password": "hunter2-job"},
        secure_params={"token": "task-tok-9", "pin": 8642},
    )
    assert shell(ctx) == Completed({"exit_code": 0})
    logged = sorted((entry.stream, entry.line) for entry in ctx.logs.drain())
    assert logged == [
        ("stderr", "token *** pin ***"),
        ("stdout", '{"password": "***"}'),
        ("stdout", '{"token": "***", "pin": ***}'),
    ]
