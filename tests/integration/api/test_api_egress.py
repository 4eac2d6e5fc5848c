"""Literal internal targets are a 422 when written, naming the field and rule (issue 14).

The app here runs with no egress allowance (as compose runs it); a tenant-bound token
writes. Host names are left to connect time (``test_connector_egress``,
``test_notify_egress``), so a name is accepted here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from common.config import Settings
from scheduler.api.app import create_app
from tests.integration.api.conftest import auth_headers
from tests.integration.api.test_api_tokens import bearer, mint

BASE = "/api/v1"
LOOPBACK_RULE = "is a loopback address; allow it with STELLWERK_EGRESS_ALLOW"
METADATA = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"


@pytest.fixture(scope="module")
def strict(api_settings: Settings) -> Iterator[TestClient]:
    """A client of an app with no egress allowance."""
    app = create_app(api_settings.model_copy(update={"egress_allow": ""}))
    with TestClient(app, headers=auth_headers()) as client:
        yield client


@pytest.fixture(scope="module")
def tenant_token(strict: TestClient) -> str:
    return str(mint(strict, scopes=["job", "job.read"], tenant="acme")["token"])


def refused(response: Any, loc: list[str | int], rule: str) -> None:
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [e["loc"] for e in errors] == [loc]
    assert rule in errors[0]["msg"]


def http_job(url: str, task_type: str = "http") -> dict[str, Any]:
    return {"name": f"egress-{uuid.uuid4().hex[:6]}", "tasks": [
        {"name": "first", "type": "noop"},
        {"name": "call", "type": task_type, "params": {"url": url}},
    ]}


def webhook(url: str) -> dict[str, Any]:
    return {"events": ["run.*"], "target": {"webhook": {"url": url, "secret": "s"}}}


@pytest.mark.parametrize(("url", "rule"), [
    (METADATA, "egress: 169.254.169.254 is a cloud metadata address, always refused"),
    ("http://[fd00:ec2::254]/latest/", "cloud metadata address, always refused"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata name"),
    ("http://10.0.0.5:8080/hook", "egress: 10.0.0.5 is a private address; allow it with "
     "STELLWERK_EGRESS_ALLOW"),
    ("http://100.64.0.1/", "is a private address"),
    ("http://[::1]:8080/", f"egress: ::1 {LOOPBACK_RULE}"),
    ("http://localhost:8080/", f"egress: localhost (127.0.0.1) {LOOPBACK_RULE}"),
])
def test_a_webhook_to_an_internal_literal_is_refused(
    strict: TestClient, tenant_token: str, url: str, rule: str,
) -> None:
    response = strict.post(f"{BASE}/subscriptions", json=webhook(url),
                           headers=bearer(tenant_token))
    refused(response, ["body", "target", "webhook", "url"], rule)


def test_a_webhook_to_the_api_itself_or_redis_is_refused(
    strict: TestClient, tenant_token: str, api_settings: Settings,
) -> None:
    redis_port = urlsplit(api_settings.redis_url or "").port
    for url in (f"{api_settings.api_url}/api/v1/jobs", f"http://127.0.0.1:{redis_port}/"):
        response = strict.post(f"{BASE}/subscriptions", json=webhook(url),
                               headers=bearer(tenant_token))
        refused(response, ["body", "target", "webhook", "url"], f"127.0.0.1 {LOOPBACK_RULE}")


@pytest.mark.parametrize("task_type", ["http", "webservice"])
@pytest.mark.parametrize(("url", "rule"), [
    (METADATA, "egress: 169.254.169.254 is a cloud metadata address, always refused"),
    ("http://[::ffff:169.254.169.254]/", "cloud metadata address, always refused"),
    ("http://192.168.1.10/", "egress: 192.168.1.10 is a private address"),
    ("http://0.0.0.0:6379/", "unspecified ('this network') address, always refused"),
    ("http://127.0.0.1:8080/api/v1/tokens", f"egress: 127.0.0.1 {LOOPBACK_RULE}"),
])
def test_a_task_calling_an_internal_literal_is_refused(
    strict: TestClient, tenant_token: str, task_type: str, url: str, rule: str,
) -> None:
    response = strict.post(f"{BASE}/jobs", json=http_job(url, task_type),
                           headers=bearer(tenant_token))
    refused(response, ["body", "tasks", 1, "params", "url"], rule)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:6379/_INFO"])
def test_an_http_task_with_another_scheme_is_refused(
    strict: TestClient, tenant_token: str, url: str,
) -> None:
    response = strict.post(f"{BASE}/jobs", json=http_job(url), headers=bearer(tenant_token))
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert "tasks" in error["loc"] and "params" in str(error) and "url" in str(error)


def test_a_jobs_webservice_url_is_checked(strict: TestClient, tenant_token: str) -> None:
    body = {**http_job("https://hooks.example.com/"), "webservice": {"url": METADATA}}
    response = strict.post(f"{BASE}/jobs", json=body, headers=bearer(tenant_token))
    refused(response, ["body", "webservice", "url"], "always refused")


def test_a_patch_to_an_internal_literal_is_refused(strict: TestClient, tenant_token: str) -> None:
    created = strict.post(f"{BASE}/jobs", json=http_job("https://hooks.example.com/"),
                          headers=bearer(tenant_token))
    assert created.status_code == 201, created.text
    patch = {"tasks": http_job(METADATA)["tasks"]}
    response = strict.patch(f"{BASE}/jobs/{created.json()['id']}", json=patch,
                            headers=bearer(tenant_token))
    refused(response, ["body", "tasks", 1, "params", "url"], "always refused")


def test_a_worker_type_and_a_task_of_it_are_checked(strict: TestClient) -> None:
    name = f"render-{uuid.uuid4().hex[:6]}"
    response = strict.post(f"{BASE}/worker-types", json={"name": name, "url": METADATA})
    refused(response, ["body", "url"], "always refused")
    registered = strict.post(f"{BASE}/worker-types",
                             json={"name": name, "url": "https://render.example.com/"})
    assert registered.status_code == 201, registered.text
    response = strict.post(f"{BASE}/jobs", json=http_job("http://10.1.2.3/", name))
    refused(response, ["body", "tasks", 1, "params", "url"], "is a private address")


def test_names_are_left_to_connect_time(strict: TestClient, tenant_token: str) -> None:
    job = strict.post(f"{BASE}/jobs", json=http_job("https://internal.example/x"),
                      headers=bearer(tenant_token))
    hook = strict.post(f"{BASE}/subscriptions", json=webhook("https://internal.example/h"),
                       headers=bearer(tenant_token))
    assert (job.status_code, hook.status_code) == (201, 201), (job.text, hook.text)


def test_an_allowance_lets_loopback_targets_be_written(client: TestClient) -> None:
    # ``client`` runs with the test suite's loopback allowance, as ``stellwerk up`` does.
    job = client.post(f"{BASE}/jobs", json=http_job("http://127.0.0.1:9/x"))
    hook = client.post(f"{BASE}/subscriptions", json=webhook("http://127.0.0.1:9/h"))
    assert (job.status_code, hook.status_code) == (201, 201), (job.text, hook.text)
    metadata = client.post(f"{BASE}/subscriptions", json=webhook(METADATA))
    refused(metadata, ["body", "target", "webhook", "url"], "always refused")
