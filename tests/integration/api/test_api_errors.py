"""Bad requests: each gets a problem+json naming what is wrong, and changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

JOBS = "/api/v1/jobs"
JobBody = Callable[..., dict[str, Any]]


def _tasks(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": list(tasks)}


BAD_BODIES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("cycle", _tasks({"name": "s", "type": "noop", "next": ["a"]},
                     {"name": "a", "type": "noop", "next": ["b"]},
                     {"name": "b", "type": "noop", "next": ["a"]}), ["'a'", "cycle"]),
    ("unknown successor", _tasks({"name": "a", "type": "noop", "next": ["ghost"]}),
     ["'a'", "'ghost'"]),
    ("duplicate names", _tasks({"name": "a", "type": "noop"}, {"name": "a", "type": "noop"}),
     ["'a'", "more than one"]),
    ("no tasks", _tasks(), ["tasks"]),
    ("missing type", _tasks({"name": "a"}), ["tasks[0].type", "required"]),
    ("type not an identifier", _tasks({"name": "a", "type": "rm -rf"}), ["tasks[0].type"]),
    ("threshold above 1", {"failure_threshold": 1.5}, ["failure_threshold"]),
    ("unparsable at", {"schedule": {"at": "next tuesday"}}, ["schedule.at"]),
    ("at without offset", {"schedule": {"at": "2030-01-01T10:00:00"}}, ["offset"]),
    ("params not an object", {"params": ["x"]}, ["params"]),
    ("task params not an object", _tasks({"name": "a", "type": "noop", "params": 3}),
     ["tasks[0].params"]),
    ("unknown field", {"colour": "red"}, ["colour"]),
    ("bad cron", {"schedule": {"cron": "61 25 * * *"}},
     ["schedule.cron", "minute field: 61 is out of range 0-59"]),
    ("bad zone", {"schedule": {"cron": "0 10 * * *", "timezone": "Mars/Olympus"}},
     ["schedule.timezone", "Mars/Olympus"]),
    # Issue 14: a built-in type's params are checked at submit, not when the attempt runs.
    ("sleep seconds not a number",
     _tasks({"name": "nap", "type": "sleep", "params": {"seconds": "abc"}}),
     ["tasks[0]", "'nap'", "params.seconds", "must be a number"]),
    ("shell argv a string", _tasks({"name": "hi", "type": "shell", "params": {"argv": "echo hi"}}),
     ["tasks[0]", "'hi'", "params.argv", "list"]),
    ("python without a function", _tasks({"name": "f", "type": "python"}),
     ["'f'", "params.function", "required"]),
    ("kubernetes without an image", _tasks({"name": "pod", "type": "kubernetes"}),
     ["'pod'", "params.image", "required"]),
    ("http with an unknown method and no url",
     _tasks({"name": "call", "type": "http", "params": {"method": "FETCH", "timeout": 0}}),
     ["'call'", "params.method: must be one of", "params.url", "params.timeout"]),
]


@pytest.mark.parametrize("case", BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_bad_job_is_refused_with_a_named_fault(
    client: TestClient, job_body: JobBody, job_count: Callable[[], int],
    case: tuple[str, dict[str, Any], list[str]],
) -> None:
    _, change, words = case
    before = job_count()

    response = client.post(JOBS, json=job_body(**change))

    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert (problem["status"], problem["title"]) == (422, "Unprocessable Entity")
    assert problem["errors"] and all({"loc", "msg"} <= e.keys() for e in problem["errors"])
    for word in words:
        assert word in problem["detail"], problem["detail"]
    assert job_count() == before


def test_secure_params_are_not_echoed_in_errors(client: TestClient, job_body: JobBody) -> None:
    response = client.post(JOBS, json=job_body(secure_params={"pw": "hunter2"}, colour=1))

    assert response.status_code == 422
    assert "hunter2" not in response.text


@pytest.mark.parametrize(
    "case",
    [
        (b'{"name": "x", "tasks": [', "application/json", 400, "malformed JSON"),
        (b'{"name": "x"}', "text/plain", 415, "application/json"),
        (b'{"name": "x"}', None, 415, "application/json"),
        (b"", "application/json", 422, "body"),
    ],
    ids=["broken JSON", "wrong content type", "no content type", "empty body"],
)
def test_unreadable_bodies(
    client: TestClient, job_count: Callable[[], int],
    case: tuple[bytes, str | None, int, str],
) -> None:
    content, content_type, status, word = case
    before = job_count()
    headers = {"content-type": content_type} if content_type else {}

    response = client.post(JOBS, content=content, headers=headers)

    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert word in response.json()["detail"]
    assert job_count() == before


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic dGVzdC1hZG1pbg=="}],
    ids=["no token", "wrong token", "wrong scheme"],
)
def test_requests_without_a_valid_token_get_401(
    anonymous: TestClient, job_body: JobBody, job_count: Callable[[], int],
    headers: dict[str, str],
) -> None:
    before = job_count()
    for method, path in [("GET", JOBS), ("POST", JOBS), ("GET", f"/api/v1/runs/{uuid.uuid4()}"),
                         ("GET", "/api/v1/processors")]:
        response = anonymous.request(method, path, headers=headers, json=job_body())
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["www-authenticate"] == "Bearer"
    assert job_count() == before


def test_health_and_openapi_need_no_token(anonymous: TestClient) -> None:
    health = anonymous.get("/api/v1/healthz")
    openapi = anonymous.get("/api/v1/openapi.json")

    assert (health.status_code, health.json()) == (
        200, {"status": "ok", "database": "ok", "redis": "ok", "crash_looping": {}})
    assert openapi.status_code == 200
    assert "/api/v1/jobs/{job_id}/runs" in openapi.json()["paths"]


@pytest.mark.parametrize(
    "path",
    ["/api/v1/jobs/{id}", "/api/v1/jobs/{id}/runs", "/api/v1/runs/{id}",
     "/api/v1/runs/{id}/journal", "/api/v1/runs/{id}/tasks/a/logs"],
)
def test_unknown_ids_get_404_naming_the_id(client: TestClient, path: str) -> None:
    missing = uuid.uuid4()

    response = client.get(path.format(id=missing))

    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert str(missing) in response.json()["detail"]


def test_running_an_unknown_job_is_404(client: TestClient) -> None:
    missing = uuid.uuid4()

    response = client.post(f"{JOBS}/{missing}/runs")

    assert response.status_code == 404
    assert str(missing) in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "parameter"),
    [("/api/v1/runs/nope", "run_id"), ("/api/v1/runs/123/journal", "run_id")],
)
def test_malformed_ids_get_422_naming_the_parameter(
    client: TestClient, path: str, parameter: str,
) -> None:
    response = client.get(path)

    assert response.status_code == 422
    assert f"path parameter {parameter}" in response.json()["detail"]


def test_unknown_route_is_a_problem_too(client: TestClient) -> None:
    response = client.get("/api/v1/nothing-here")

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


def test_the_root_page_points_at_the_api_and_loads_nothing_from_outside(
    anonymous: TestClient,
) -> None:
    page = anonymous.get("/")
    assert page.status_code == 200
    assert "/api/v1/openapi.json" in page.text
    # The web UI's own files only (tests/integration/api/test_api_web_ui.py has more).
    assert "://" not in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert anonymous.get("/api/v1/docs").status_code == 404  # Swagger would need a CDN
