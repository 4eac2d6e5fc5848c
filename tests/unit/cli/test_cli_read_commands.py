"""The read commands' ``--json``, and ``token``, ``fire-times`` and ``subscription`` (issue 17),
against a canned API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.conftest import CannedApi
from tests.unit.cli.test_cli_client import JOB_ID, RUN_ID, a_run, stellwerk

TOKEN_ID = "5d1c0a52-0000-4000-8000-0000000000bb"


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("STELLWERK_TOKEN", "STELLWERK_API_URL", "STELLWERK_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_json_prints_the_api_s_answer_whole(canned_api: CannedApi) -> None:
    run = a_run("ACTIVE", "COMPLETED", "ACTIVE", "WAITING")
    canned_api.reply("GET", f"/api/v1/runs/{RUN_ID}", (200, run))
    canned_api.reply("GET", "/api/v1/jobs?limit=50", (200, {"data": [], "next_cursor": None}))
    shown = stellwerk(canned_api.url, "show", RUN_ID, "--json", columns=40)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == run  # whole, however narrow the terminal
    listed = stellwerk(canned_api.url, "jobs", "--json")
    assert json.loads(listed.output) == {"data": [], "next_cursor": None}


def test_tokens_are_listed_without_values_and_revoked(canned_api: CannedApi) -> None:
    canned_api.reply("GET", "/api/v1/tokens?limit=500", (200, {"data": [{
        "id": TOKEN_ID, "name": "ci", "scopes": ["job.read"], "tenant": "team-a",
        "created_by": "admin", "created_at": "2026-11-01T10:00:00Z", "expires_at": None,
    }], "next_cursor": None}))
    canned_api.reply("DELETE", f"/api/v1/tokens/{TOKEN_ID}", (204, None))
    listed = stellwerk(canned_api.url, "token", "list")
    assert listed.exit_code == 0, listed.output
    assert TOKEN_ID in listed.output and "job.read" in listed.output and "team-a" in listed.output
    revoked = stellwerk(canned_api.url, "token", "revoke", TOKEN_ID)
    assert revoked.exit_code == 0 and f"token {TOKEN_ID} revoked" in revoked.output
    assert canned_api.calls("DELETE", f"/api/v1/tokens/{TOKEN_ID}")


def test_fire_times_are_shown_in_the_job_s_zone_with_utc_beside(canned_api: CannedApi) -> None:
    canned_api.reply("GET", "/api/v1/jobs/nightly/fire-times?count=2", (200, {
        "job_id": JOB_ID, "cron": "30 2 * * *", "timezone": "Europe/Berlin",
        "after": "2026-03-28T00:00:00Z",
        "fire_times": ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z"],
    }))
    result = stellwerk(canned_api.url, "fire-times", "nightly", "--count", "2")
    assert result.exit_code == 0, result.output
    assert "2026-03-28 02:30:00 CET" in result.output and "2026-03-28 01:30:00" in result.output
    # the skipped 02:30 of the DST change fires right after the gap
    assert "2026-03-29 03:00:00 CEST" in result.output and "2026-03-29 01:00:00" in result.output


def test_a_subscription_names_its_job_by_name_and_needs_one_target(
    canned_api: CannedApi,
) -> None:
    canned_api.reply("GET", "/api/v1/jobs/nightly", (200, {"id": JOB_ID, "name": "nightly"}))
    canned_api.reply("POST", "/api/v1/subscriptions", (201, {"id": "sub-1"}))
    made = stellwerk(canned_api.url, "subscription", "create", "--event", "run.*",
                     "--webhook", "https://ops.example/hook", "--job", "nightly")
    assert made.exit_code == 0, made.output
    body = canned_api.calls("POST", "/api/v1/subscriptions")[0]["body"]
    assert body == {"events": ["run.*"], "selector": {"job_id": JOB_ID},
                    "target": {"webhook": {"url": "https://ops.example/hook"}}}
    neither = stellwerk(canned_api.url, "subscription", "create", "--event", "run.*")
    assert neither.exit_code == 1 and "--webhook URL or --celery-task NAME" in neither.output
