"""A 405 lists in ``Allow`` every method of the path, not only the first route's.

No database: the router answers 405 before any dependency runs, so the app's lifespan
(which opens the connections) is not entered.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from common.config import Settings
from scheduler.api.app import create_app

UUID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings()))


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("DELETE", "/api/v1/jobs", "GET, POST"),  # answered "Allow: POST" before issue 14
    ("POST", f"/api/v1/jobs/{UUID}", "DELETE, GET, PATCH, PUT"),
    ("DELETE", "/api/v1/worker-types", "GET, POST"),
    ("PUT", f"/api/v1/jobs/{UUID}/runs", "GET, POST"),
    ("POST", f"/api/v1/tokens/{UUID}", "DELETE"),
    ("POST", "/api/v1/healthz", "GET"),
])
def test_allow_lists_every_method_of_the_path(
    client: TestClient, method: str, path: str, allowed: str,
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allowed
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == f"{method} is not allowed on {path}; allowed: {allowed}"

