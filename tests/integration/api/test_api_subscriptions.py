"""``/subscriptions`` against the real API and PostgreSQL: CRUD, scopes, tenants, secrets."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import Delivery, DeliveryAttempt, Subscription
from common.secure_params import SecretBox
from scheduler.api.app import create_app
from tests.integration.api.conftest import JobBody, Recorded, auth_headers
from tests.integration.api.test_api_tokens import bearer, create_job, mint

BASE = "/api/v1"
SECRET = "whsec-do-not-show"
HEADER_VALUE = "Bearer header-do-not-show"


def webhook(**selector: Any) -> dict[str, Any]:
    return {
        "events": ["run.*", "task.failed"], "selector": selector,
        "target": {"webhook": {"url": "https://hooks.example.com/stellwerk", "secret": SECRET,
                               "headers": {"Authorization": HEADER_VALUE}}},
    }


def subscribe(client: TestClient, body: dict[str, Any], token: str | None = None) -> Any:
    headers = bearer(token) if token else None
    return client.post(f"{BASE}/subscriptions", json=body, headers=headers)


def test_create_read_list_delete_and_secrets_never_returned(
    client: TestClient, sessions: sessionmaker[Session], api_settings: Any,
) -> None:
    created = subscribe(client, webhook(application="crm"))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["target"] == {"webhook": {"url": "https://hooks.example.com/stellwerk",
                                          "headers": ["Authorization"]},
                              "celery_task": None, "queue": None}
    assert body["selector"]["application"] == "crm"
    assert body["events"] == ["run.*", "task.failed"]
    read = client.get(f"{BASE}/subscriptions/{body['id']}")
    listed = client.get(f"{BASE}/subscriptions?limit=500")
    for text in (created.text, read.text, listed.text):
        assert SECRET not in text
        assert HEADER_VALUE not in text
    assert read.json() == body
    assert body["id"] in {s["id"] for s in listed.json()["data"]}

    with sessions() as session:
        row = session.get(Subscription, uuid.UUID(body["id"]))
        assert row is not None and row.sealed_secret and row.sealed_headers
        assert SECRET not in row.sealed_secret and HEADER_VALUE not in row.sealed_headers
        box = SecretBox(api_settings.secret_key)
        assert box.open(row.sealed_secret) == {"secret": SECRET}
        assert box.open(row.sealed_headers) == {"Authorization": HEADER_VALUE}

    assert client.delete(f"{BASE}/subscriptions/{body['id']}").status_code == 204
    assert client.get(f"{BASE}/subscriptions/{body['id']}").status_code == 404
    assert client.delete(f"{BASE}/subscriptions/{body['id']}").status_code == 404


def test_a_celery_task_target_defaults_to_the_celery_queue(client: TestClient) -> None:
    body = {"events": ["*"], "target": {"celery_task": "billing.on_event"}}
    created = subscribe(client, body)
    assert created.status_code == 201, created.text
    assert created.json()["target"] == {"webhook": None, "celery_task": "billing.on_event",
                                        "queue": "celery"}


def test_create_and_delete_are_announced_for_notify(
    client: TestClient, recorded: Recorded, job_body: JobBody,
) -> None:
    job = create_job(client, job_body(name="announced", draft=True)).json()
    created = subscribe(client, webhook(job_id=job["id"])).json()
    assert client.delete(f"{BASE}/subscriptions/{created['id']}").status_code == 204
    mine = [e for e in recorded() if e.get("subscription_id") == created["id"]]
    assert [e["event"] for e in reversed(mine)] == ["subscription.created",
                                                    "subscription.deleted"]
    assert {(e["job_id"], e["job_name"]) for e in mine} == {(job["id"], "announced")}
    assert all(e["id"] for e in mine)


def test_deleting_a_job_deletes_its_subscriptions_and_announces_it(
    client: TestClient, recorded: Recorded, job_body: JobBody,
) -> None:
    job = create_job(client, job_body(name="doomed", draft=True)).json()
    other = create_job(client, job_body(name="kept", draft=True)).json()
    ids = [subscribe(client, webhook(job_id=job["id"])).json()["id"] for _ in range(2)]
    kept = subscribe(client, webhook(job_id=other["id"])).json()["id"]

    assert client.delete(f"{BASE}/jobs/{job['id']}").status_code == 204

    for sid in ids:
        assert client.get(f"{BASE}/subscriptions/{sid}").status_code == 404
    assert client.get(f"{BASE}/subscriptions/{kept}").status_code == 200
    deleted = {e["subscription_id"] for e in recorded()
               if e["event"] == "subscription.deleted"}
    assert set(ids) <= deleted
    assert kept not in deleted


def test_a_job_filter_lists_only_that_jobs_subscriptions(
    client: TestClient, job_body: JobBody,
) -> None:
    job = create_job(client, job_body(draft=True)).json()
    mine = {subscribe(client, webhook(job_id=job["id"])).json()["id"] for _ in range(3)}
    subscribe(client, webhook())
    page = client.get(f"{BASE}/subscriptions", params={"job_id": job["id"], "limit": 2}).json()
    rest = client.get(f"{BASE}/subscriptions",
                      params={"job_id": job["id"], "cursor": page["next_cursor"]}).json()
    assert len(page["data"]) == 2 and rest["next_cursor"] is None
    assert {s["id"] for s in page["data"] + rest["data"]} == mine


def test_scopes_job_to_change_and_job_read_to_read(client: TestClient) -> None:
    reader = mint(client, scopes=["job.read"])["token"]
    tasker = mint(client, scopes=["job.task"])["token"]
    sid = subscribe(client, webhook()).json()["id"]
    assert subscribe(client, webhook(), reader).status_code == 403
    assert client.delete(f"{BASE}/subscriptions/{sid}", headers=bearer(reader)).status_code == 403
    assert client.get(f"{BASE}/subscriptions/{sid}", headers=bearer(reader)).status_code == 200
    for path in ("", f"/{sid}", f"/{sid}/deliveries"):
        response = client.get(f"{BASE}/subscriptions{path}", headers=bearer(tasker))
        assert response.status_code == 403, path
        assert "job.read" in response.json()["detail"]
    assert client.get(f"{BASE}/subscriptions/{sid}").status_code == 200  # nothing changed


def test_a_tenant_bound_token_sees_and_creates_only_its_tenants_subscriptions(
    client: TestClient, job_body: JobBody,
) -> None:
    acme = mint(client, scopes=["job"], tenant="acme")["token"]
    theirs = subscribe(client, webhook(tenant="globex")).json()["id"]
    everyone = subscribe(client, webhook()).json()["id"]
    created = subscribe(client, webhook(), acme)
    assert created.status_code == 201, created.text
    mine = created.json()
    assert mine["selector"]["tenant"] == "acme"  # bound to its tenant, not every tenant

    assert subscribe(client, webhook(tenant="globex"), acme).status_code == 403
    listed = {s["id"] for s in client.get(f"{BASE}/subscriptions?limit=500",
                                          headers=bearer(acme)).json()["data"]}
    assert mine["id"] in listed and not {theirs, everyone} & listed
    for sid in (theirs, everyone):
        for method, path in (("GET", ""), ("DELETE", ""), ("GET", "/deliveries")):
            response = client.request(method, f"{BASE}/subscriptions/{sid}{path}",
                                      headers=bearer(acme))
            assert response.status_code == 404, (method, path)
            assert response.json()["detail"] == f"subscription {sid} not found"
    assert client.get(f"{BASE}/subscriptions/{theirs}").status_code == 200

    foreign_job = create_job(client, job_body(tenant="globex", draft=True)).json()
    refused = subscribe(client, webhook(job_id=foreign_job["id"]), acme)
    assert refused.status_code == 422
    assert "selector.job_id" in refused.json()["detail"]


@pytest.mark.parametrize(("body", "named"), [
    ({"events": ["*"]}, "target"),
    ({"events": ["*"], "target": {}}, "target"),
    ({"events": ["bad pattern"], "target": {"celery_task": "t"}}, "events[0]"),
    ({"events": ["*"], "target": {"webhook": {"url": "not a url", "secret": "s"}}},
     "target.webhook.url"),
    ({"events": ["*"], "selector": {"job_id": str(uuid.UUID(int=7))},
      "target": {"celery_task": "t"}}, "selector.job_id"),
])
def test_bad_subscriptions_are_422_naming_the_field_and_change_nothing(
    client: TestClient, sessions: sessionmaker[Session], body: dict[str, Any], named: str,
) -> None:
    with sessions() as session:
        before = len(session.scalars(select(Subscription.id)).all())
    response = subscribe(client, body)
    assert response.status_code == 422, response.text
    assert named in response.json()["detail"]
    with sessions() as session:
        assert len(session.scalars(select(Subscription.id)).all()) == before


def test_a_webhook_needs_the_secret_key(api_settings: Any) -> None:
    keyless = api_settings.model_copy(update={"secret_key": None})
    with TestClient(create_app(keyless), headers=auth_headers()) as client:
        response = subscribe(client, webhook())
        assert response.status_code == 422
        assert "STELLWERK_SECRET_KEY" in response.json()["detail"]
        assert "target.webhook.secret" in response.json()["detail"]
        celery = subscribe(client, {"events": ["*"], "target": {"celery_task": "t"}})
        assert celery.status_code == 201  # no secret to keep


def test_the_delivery_log_lists_deliveries_with_their_tries(
    client: TestClient, sessions: sessionmaker[Session],
) -> None:
    sid = uuid.UUID(subscribe(client, webhook()).json()["id"])
    first, second = uuid.uuid4(), uuid.uuid4()
    with sessions.begin() as session:
        for n, (did, state) in enumerate(((first, "dead"), (second, "pending"))):
            session.add(Delivery(
                id=did, subscription_id=sid, event_id=uuid.uuid4(), event="run.started",
                payload={"event": "run.started"}, state=state, attempts=2 - n,
                due_at=None, created_at=_at(n), finished_at=None,
            ))
        session.flush()
        session.add_all([
            DeliveryAttempt(delivery_id=first, number=k, at=_at(k), duration_ms=12.5,
                            status_code=503, error="not 2xx") for k in (1, 2)
        ])
    page = client.get(f"{BASE}/subscriptions/{sid}/deliveries", params={"limit": 1}).json()
    assert [d["id"] for d in page["data"]] == [str(second)]  # newest first
    rest = client.get(f"{BASE}/subscriptions/{sid}/deliveries",
                      params={"cursor": page["next_cursor"]}).json()
    (dead,) = rest["data"]
    assert dead["state"] == "dead"
    assert [(a["number"], a["status_code"]) for a in dead["attempts"]] == [(1, 503), (2, 503)]
    only_dead = client.get(f"{BASE}/subscriptions/{sid}/deliveries?state=dead").json()
    assert [d["id"] for d in only_dead["data"]] == [str(first)]
    assert client.get(f"{BASE}/subscriptions/{sid}/deliveries?state=nope").status_code == 422
    assert json.loads(json.dumps(dead["payload"])) == {"event": "run.started"}


def _at(seconds: int) -> datetime:
    return datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)


def test_metrics_count_deliveries_and_their_tries_by_target_and_state(
    client: TestClient, sessions: sessionmaker[Session],
) -> None:
    def scrape() -> dict[tuple[str, str, str], float]:
        text = client.get(f"{BASE}/metrics").text
        return {(s.name, s.labels["target"], s.labels["state"]): s.value
                for family in text_string_to_metric_families(text)
                if family.name in ("stellwerk_deliveries", "stellwerk_delivery_attempts")
                for s in family.samples}

    before = scrape()
    assert before[("stellwerk_deliveries", "celery_task", "pending")] >= 0  # zeros are shown
    sid = uuid.UUID(subscribe(client, webhook()).json()["id"])
    with sessions.begin() as session:
        for state, tries in (("dead", 3), ("delivered", 2), ("delivered", 1)):
            session.add(Delivery(
                id=uuid.uuid4(), subscription_id=sid, event_id=uuid.uuid4(), event="run.done",
                payload={}, state=state, attempts=tries, created_at=_at(0),
            ))
    after = scrape()

    def grew(name: str, state: str) -> float:
        return after[(name, "webhook", state)] - before[(name, "webhook", state)]

    assert (grew("stellwerk_deliveries", "dead"), grew("stellwerk_deliveries", "delivered")) == (
        1, 2)
    assert grew("stellwerk_delivery_attempts", "dead") == 3
    assert grew("stellwerk_delivery_attempts", "delivered") == 3
