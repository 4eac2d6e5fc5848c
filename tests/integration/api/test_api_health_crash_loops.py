"""``GET /healthz`` under ``stellwerk up``: a crash-looping component makes it 503."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from common.config import Settings
from common.health import write_crash_loops
from scheduler.api.app import create_app


def test_a_crash_looping_component_is_named_with_503(
    api_settings: Settings, tmp_path: Path
) -> None:
    status = tmp_path / "supervisor.json"
    write_crash_loops(status, {})
    settings = api_settings.model_copy(update={"supervisor_status": status})
    with TestClient(create_app(settings)) as anonymous:
        assert anonymous.get("/api/v1/healthz").status_code == 200
        write_crash_loops(status, {"engine": 4})
        looping = anonymous.get("/api/v1/healthz")
        write_crash_loops(status, {})
        recovered = anonymous.get("/api/v1/healthz")
    assert (looping.status_code, looping.json()) == (503, {
        "status": "error", "database": "ok", "redis": "ok", "crash_looping": {"engine": 4},
    })
    assert recovered.status_code == 200
