"""Run control over REST without an engine: actions apply in the API's transaction."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from common.persistence.models import OutboxMessage, Run, TaskRun
from scheduler.beat import timers
from tests.integration.api.conftest import FROZEN_AT, JobBody, Queued


def _run_of(client: TestClient, body: dict[str, Any]) -> str:
    response = client.post("/api/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])


def _version(sessions: sessionmaker[Session], run_id: str) -> int:
    with sessions() as session:
        return int(session.scalar(select(Run.version).where(Run.id == uuid.UUID(run_id))) or 0)


def test_a_refused_action_is_409_naming_the_state_and_changes_nothing(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session]
) -> None:
    run_id = _run_of(client, job_body(name="refused"))
    before = _version(sessions, run_id)
    response = client.post(f"/api/v1/runs/{run_id}/pause")
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "run is READY: cannot pause"
    assert client.get(f"/api/v1/runs/{run_id}").json()["state"] == "READY"
    assert _version(sessions, run_id) == before


def test_cancel_retry_and_skip_move_the_run_and_relay_the_dispatch(
    client: TestClient, job_body: JobBody, sessions: sessionmaker[Session], queued: Queued
) -> None:
    run_id = _run_of(client, job_body(name="controlled"))
    canceled = client.post(f"/api/v1/runs/{run_id}/cancel")
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["state"] == "CANCELED"
    assert {t["state"] for t in canceled.json()["tasks"]} == {"CANCELED"}
    again = client.post(f"/api/v1/runs/{run_id}/cancel")
    assert again.status_code == 409
    assert "CANCELED" in again.json()["detail"]
    actors = {e["actor"] for e in client.get(f"/api/v1/runs/{run_id}/journal").json()["entries"]
              if e["to"] == "CANCELED"}
    assert actors == {"admin"}

    before = _version(sessions, run_id)
    retried = client.post(f"/api/v1/runs/{run_id}/retry").json()
    assert retried["state"] == "ACTIVE"
    assert _version(sessions, run_id) == before + 1  # engines reload their cached snapshot
    first = next(t for t in retried["tasks"] if t["name"] == "a")
    assert first["state"] == "READY"
    sent = [m["payload"] for m in queued("tasks.noop") if m["payload"]["run_id"] == run_id]
    assert [(m["task"], m["attempt"]) for m in sent] == [("a", first["attempt"])]

    skipped = client.post(f"/api/v1/runs/{run_id}/tasks/{first['id']}/skip").json()
    assert {t["name"]: t["state"] for t in skipped["tasks"]}["a"] == "SKIPPED"
    assert {t["name"]: t["state"] for t in skipped["tasks"]}["b"] == "READY"


def test_unknown_runs_and_tasks_are_404(client: TestClient, job_body: JobBody) -> None:
    run_id = _run_of(client, job_body(name="unknown"))
    assert client.post(f"/api/v1/runs/{uuid.uuid4()}/cancel").status_code == 404
    missing = client.post(f"/api/v1/runs/{run_id}/tasks/nope/confirm")
    assert missing.status_code == 404
    assert "nope" in missing.json()["detail"]
    assert client.post(f"/api/v1/runs/{run_id}/tasks/{uuid.uuid4()}/skip").status_code == 404
    assert client.post(f"/api/v1/runs/{run_id}/confirm").json()["detail"] == (
        "run is READY: no task waits for confirmation"
    )


def test_state_changes_set_the_due_times_the_beat_timers_read(
    frozen_client: TestClient, job_body: JobBody, sessions: sessionmaker[Session]
) -> None:
    run_id = _run_of(frozen_client, job_body(name="timers", timeout=60))
    uid = uuid.UUID(run_id)
    act = frozen_client.post
    assert act(f"/api/v1/runs/{run_id}/cancel").json()["state"] == "CANCELED"
    assert act(f"/api/v1/runs/{run_id}/retry").json()["state"] == "ACTIVE"
    with sessions.begin() as session:
        assert session.get_one(Run, uid).timeout_at == FROZEN_AT + timedelta(seconds=60)
        # A worker has taken task a (as the engine would record it).
        session.execute(update(TaskRun).where(TaskRun.run_id == uid, TaskRun.name == "a")
                        .values(state="ACTIVE"))
    assert act(f"/api/v1/runs/{run_id}/cancel").json()["state"] == "CANCEL_REQUESTED"
    grace = timedelta(seconds=30)
    with sessions.begin() as session:
        assert session.get_one(Run, uid).cancel_requested_at == FROZEN_AT
        signals = [
            [session.get_one(OutboxMessage, i).payload for i in
             timers.signal_cancel_grace(session, now, grace)
             + timers.signal_run_timeouts(session, now)]
            for now in (FROZEN_AT + grace / 2, FROZEN_AT + grace)
        ]
    early, due = ([p["signal"] for p in sent if p["run_id"] == run_id] for sent in signals)
    assert early == []
    assert due == ["cancel_grace_over"]
