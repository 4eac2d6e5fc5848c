"""A table of bad requests: each is a 4xx problem naming the task or field, and changes nothing.

Every case here once was, or could have been, a 500 or a vague message: graph rules,
types and enums, limits (body size, task count, params size), values PostgreSQL
cannot store (NUL characters, NaN), malformed ids and unknown ids.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import Job

JOBS = "/api/v1/jobs"
JobBody = Callable[..., dict[str, Any]]
MiB = 1024 * 1024


@dataclass(frozen=True)
class Bad:
    """One bad request: ``change`` is merged into a valid job body (a PATCH sends it alone)
    unless ``raw`` is given."""

    name: str
    status: int
    words: list[str]
    change: dict[str, Any] = field(default_factory=dict)
    raw: bytes | None = None
    content_type: str | None = "application/json"
    method: str = "POST"
    path: str = JOBS  # ``{job}``: a draft job made for the test


def _tasks(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": list(tasks)}


def _noop(name: str, *successors: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "noop", "next": list(successors), **extra}


def _independent(n: int) -> bytes:
    """``n`` tasks written compactly, so that the body stays under its own limit."""
    tasks = [{"name": f"t{i}", "type": "noop"} for i in range(n)]
    return json.dumps({"name": "wide", "tasks": tasks}, separators=(",", ":")).encode()


CASES = [
    # Graph rules (docs/job-spec.md, "Task fields"), each naming the task.
    Bad("cyclic graph", 422, ["'a'", "cycle"],
        _tasks(_noop("s", "a"), _noop("a", "b"), _noop("b", "a"))),
    Bad("unknown successor", 422, ["'a'", "'ghost'"], _tasks(_noop("a", "ghost"))),
    Bad("duplicate task names", 422, ["'a'", "more than one"], _tasks(_noop("a"), _noop("a"))),
    Bad("no tasks", 422, ["tasks"], _tasks()),
    Bad("missing type", 422, ["tasks[0].type", "required"], _tasks({"name": "a"})),
    Bad("type not an identifier", 422, ["tasks[0].type (task 'a')", "identifier"],
        _tasks({"name": "a", "type": "rm -rf"})),
    # Types, ranges and enums of fields.
    Bad("threshold out of range", 422, ["failure_threshold", "less than or equal to 1"],
        {"failure_threshold": 1.5}),
    Bad("priority wrong type", 422, ["priority", "integer"], {"priority": "high"}),
    Bad("wrong enum", 422, ["overlap", "'allow'"], {"overlap": "sometimes"}),
    Bad("unknown field", 422, ["colour", "not permitted"], {"colour": "red"}),
    Bad("unparsable date", 422, ["schedule.at"], {"schedule": {"at": "next tuesday"}}),
    Bad("date without offset", 422, ["suspend_at", "offset"],
        {"suspend_at": "2030-01-01T10:00:00"}),
    Bad("date out of range", 422, ["schedule.at", "between"],
        {"schedule": {"at": "9999-12-31T23:59:59+00:00"}}),
    Bad("negative timeout", 422, ["tasks[0].timeout (task 'a')", "greater than"],
        _tasks(_noop("a", timeout=-5))),
    Bad("duration too long", 422, ["late_after"], {"late_after": 10**12}),
    Bad("params not an object", 422, ["params", "dictionary"], {"params": ["x"]}),
    Bad("task params not an object", 422, ["tasks[0].params (task 'a')"],
        _tasks(_noop("a", params=3))),
    Bad("tenant longer than its column", 422, ["tenant", "200"], {"tenant": "t" * 201}),
    Bad("bad cron", 422, ["schedule.cron", "minute field: 61 is out of range 0-59"],
        {"schedule": {"cron": "61 25 * * *"}}),
    Bad("cron extension", 422, ["schedule.cron", "day-of-month field", "L"],
        {"schedule": {"cron": "0 0 L * *"}}),
    # Values PostgreSQL cannot store.
    Bad("NUL in a name", 422, ["name", "NUL"], {"name": "a\x00b"}),
    Bad("NUL deep in params", 422, ["tasks[0].params.x[1] (task 'a')", "NUL"],
        _tasks(_noop("a", params={"x": ["ok", "\x00"]}))),
    Bad("NaN in params", 422, ["params.x", "finite"],
        raw=b'{"name": "n", "tasks": [{"name": "a", "type": "noop"}], "params": {"x": NaN}}'),
    # Limits.
    Bad("params too large", 422, ["params", "limit is 65536"],
        {"params": {"blob": "x" * (64 * 1024)}}),
    Bad("task secure params too large", 422, ["tasks[0].secure_params (task 'a')", "limit"],
        _tasks(_noop("a", secure_params={"blob": "x" * (64 * 1024)}))),
    Bad("too many tasks", 422, ["tasks", "at most 20000"], raw=_independent(20_001)),
    Bad("huge body", 413, ["exceeds the limit of 1048576 bytes"],
        raw=json.dumps({"name": "x", "description": "x" * MiB}).encode()),
    # Bodies that are not a JSON object.
    Bad("broken JSON", 400, ["malformed JSON"], raw=b'{"name": "x", "tasks": ['),
    Bad("wrong content type", 415, ["application/json", "text/plain"], raw=b'{"name": "x"}',
        content_type="text/plain"),
    Bad("no content type", 415, ["application/json"], raw=b'{"name": "x"}', content_type=None),
    Bad("empty body", 422, ["body"], raw=b""),
    Bad("body is an array", 422, ["object"], raw=b"[1, 2]"),
    # A PATCH obeys the rules of a create.
    Bad("patch breaks the graph", 422, ["'a'", "'ghost'"], _tasks(_noop("a", "ghost")),
        method="PATCH", path=f"{JOBS}/{{job}}"),
    Bad("patch with NUL", 422, ["description", "NUL"], {"description": "\x00"},
        method="PATCH", path=f"{JOBS}/{{job}}"),
    Bad("patch params too large", 422, ["params", "limit"],
        {"params": {"blob": "x" * (64 * 1024)}}, method="PATCH", path=f"{JOBS}/{{job}}"),
    # Ids and query parameters.
    Bad("invalid UUID in the path", 422, ["path parameter run_id"], method="GET",
        path="/api/v1/runs/not-a-uuid"),
    Bad("a job name no job has", 404, ["job 'no-such-job' not found"], method="GET",
        path=f"{JOBS}/no-such-job"),
    Bad("a job name over 200 characters", 422, ["path parameter job_id"], method="GET",
        path=f"{JOBS}/{'n' * 201}"),
    Bad("unknown job id", 404, ["job", "not found"], method="GET",
        path=f"{JOBS}/{uuid.UUID(int=7)}"),
    Bad("unknown job id in an action", 404, ["00000000-0000-0000-0000-000000000007"],
        method="POST", path=f"{JOBS}/{uuid.UUID(int=7)}/runs", raw=b""),
    Bad("unknown run id", 404, ["run", "not found"], method="GET",
        path=f"/api/v1/runs/{uuid.UUID(int=7)}"),
    Bad("unknown task of a run", 404, ["task 'ghost'"], method="GET",
        path="/api/v1/runs/{run}/tasks/ghost/logs"),
    Bad("NUL in a task name", 422, ["path parameter task", "NUL"], method="GET",
        path="/api/v1/runs/{run}/tasks/%00/logs"),
    Bad("NUL in a filter", 422, ["query parameter tenant", "NUL"], method="GET",
        path=f"{JOBS}?tenant=%00"),
    Bad("wrong state filter", 422, ["query parameter state"], method="GET",
        path=f"{JOBS}?state=SLEEPING"),
    Bad("label filter without =", 422, ["query parameter label", "key=value"], method="GET",
        path=f"{JOBS}?label=team"),
    Bad("forged cursor", 422, ["query parameter cursor"], method="GET",
        path=f"{JOBS}?cursor=bm90LWEtY3Vyc29y"),
    Bad("page size out of range", 422, ["query parameter limit"], method="GET",
        path=f"{JOBS}?limit=0"),
]


@pytest.fixture(scope="module")
def existing(client: TestClient) -> Iterator[dict[str, str]]:
    """A draft job (for PATCH) and a one-off job's run (for task paths)."""
    draft = client.post(JOBS, json={"name": "draft", "draft": True, "tasks": [_noop("a")]})
    one_off = client.post(JOBS, json={"name": "once", "tasks": [_noop("a")]})
    assert draft.status_code == one_off.status_code == 201
    yield {"job": draft.json()["id"], "run": one_off.json()["run_id"]}


def _version(sessions: sessionmaker[Session], job_id: str) -> int:
    with sessions() as session:
        job = session.get(Job, uuid.UUID(job_id))
        assert job is not None
        return job.version


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_a_named_4xx_and_changes_nothing(
    client: TestClient, job_body: JobBody, case: Bad, *, job_count: Callable[[], int],
    sessions: sessionmaker[Session], existing: dict[str, str],
) -> None:
    before = (job_count(), _version(sessions, existing["job"]))
    body = case.change if case.method == "PATCH" else job_body(**case.change)
    content = case.raw if case.raw is not None else json.dumps(body).encode()
    headers = {"content-type": case.content_type} if case.content_type else {}

    response = client.request(
        case.method, case.path.format(**existing), content=content, headers=headers,
    )

    assert response.status_code == case.status, response.text[:500]
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == case.status
    for word in case.words:
        assert word in problem["detail"], problem["detail"]
    assert (job_count(), _version(sessions, existing["job"])) == before


def test_a_chunked_body_over_the_limit_is_413(
    client: TestClient, job_count: Callable[[], int],
) -> None:
    before = job_count()

    def chunks() -> Iterator[bytes]:
        yield b'{"name": "x", "description": "'
        for _ in range(17):
            yield b"x" * 64 * 1024
        yield b'"}'

    response = client.post(JOBS, content=chunks(), headers={"content-type": "application/json"})

    assert response.status_code == 413, response.text[:300]
    assert "exceeds the limit" in response.json()["detail"]
    assert job_count() == before


def test_the_largest_accepted_job_is_accepted(client: TestClient, job_body: JobBody) -> None:
    """The limits are limits, not off-by-one refusals: params of exactly 64 KiB pass."""
    blob = "x" * (64 * 1024 - len('{"blob":""}'))

    response = client.post(JOBS, json=job_body(draft=True, params={"blob": blob}))

    assert response.status_code == 201, response.text[:300]
