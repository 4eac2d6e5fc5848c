"""``/limits`` (issue 16): set, list, delete; bad input is a 422 naming it, changing nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

BASE = "/api/v1"


def own(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def limits(client: TestClient) -> dict[str, dict[str, Any]]:
    response = client.get(f"{BASE}/limits")
    assert response.status_code == 200, response.text
    return {row["key"]: row for row in response.json()["data"]}


def test_a_limit_is_set_listed_changed_and_deleted(client: TestClient) -> None:
    key = own("type:render")
    response = client.put(f"{BASE}/limits/{key}", json={"limit": 10})
    assert response.status_code == 200, response.text
    assert response.json() == {"key": key, "limit": 10, "per": None, "weight": None,
                               "active": 0, "waiting": 0}
    assert client.put(f"{BASE}/limits/{key}", json={"limit": 3}).json()["limit"] == 3
    assert limits(client)[key]["limit"] == 3
    assert client.delete(f"{BASE}/limits/{key}").status_code == 204
    assert key not in limits(client)
    assert client.delete(f"{BASE}/limits/{key}").status_code == 404


def test_a_rate_and_a_tenants_weight(client: TestClient) -> None:
    rate, tenant = own("rate:github"), own("tenant:acme")
    assert client.put(f"{BASE}/limits/{rate}", json={"limit": 100, "per": 60}).json()["per"] == 60
    row = client.put(f"{BASE}/limits/{tenant}", json={"limit": 50, "weight": 3}).json()
    assert (row["limit"], row["weight"]) == (50, 3)


@pytest.mark.parametrize(("key", "body", "named"), [
    ("type:render", {"limit": 0}, "limit"),
    ("type:render", {"limit": -2}, "limit"),
    ("rate:github", {"limit": 10, "per": 0}, "per"),
    ("rate:github", {"limit": 10}, "per"),
    ("tenant:acme", {"weight": 0}, "weight"),
    ("tenant:acme", {"weight": 101}, "weight"),
    ("type:render", {"limit": 2, "weight": 2}, "weight"),
    ("render", {"limit": 2}, "key"),
    ("type:" + "x" * 201, {"limit": 2}, "key"),
    ("type:render", {}, "limit"),
])
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(
    client: TestClient, key: str, body: dict[str, Any], named: str,
) -> None:
    key = key + "-" + uuid.uuid4().hex[:6] if len(key) < 100 else key
    response = client.put(f"{BASE}/limits/{key}", json=body)
    assert response.status_code == 422, response.text
    assert named in response.text
    assert key not in limits(client)


def test_metrics_show_each_keys_usage_held_attempts_and_limit(client: TestClient) -> None:
    key = own("type:metered")
    assert client.put(f"{BASE}/limits/{key}", json={"limit": 7}).status_code == 200
    text = client.get(f"{BASE}/metrics").text
    assert f'stellwerk_flow_limit{{key="{key}"}} 7.0' in text
    assert f'stellwerk_flow_active{{key="{key}"}} 0.0' in text
    assert f'stellwerk_flow_held{{key="{key}"}} 0.0' in text


def test_a_tenant_bound_token_reads_limits_but_not_other_tenants_or_changes(
    client: TestClient,
) -> None:
    mine, theirs = own("tenant:acme"), own("tenant:globex")
    for key in (mine, theirs):
        assert client.put(f"{BASE}/limits/{key}", json={"weight": 2}).status_code == 200
    token = client.post(f"{BASE}/tokens", json={
        "name": "reader", "scopes": ["job"], "tenant": mine.removeprefix("tenant:")}).json()
    headers = {"Authorization": f"Bearer {token['token']}"}
    listed = {row["key"] for row in client.get(f"{BASE}/limits", headers=headers).json()["data"]}
    assert mine in listed and theirs not in listed
    refused = client.put(f"{BASE}/limits/{mine}", json={"weight": 9}, headers=headers)
    assert refused.status_code == 403
    assert limits(client)[mine]["weight"] == 2
