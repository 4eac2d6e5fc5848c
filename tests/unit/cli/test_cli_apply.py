"""``stellwerk apply`` (issue 17) against a canned API: what it sends, what it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli.conftest import CannedApi
from tests.unit.cli.test_cli_client import stellwerk

NIGHTLY = "name: nightly\nschedule: {cron: '30 2 * * *'}\ntasks:\n  - {name: a, type: noop}\n"


def changed(action: str, *changes: dict[str, object], dry_run: bool = False) -> dict[str, object]:
    return {"action": action, "dry_run": dry_run, "changes": list(changes),
            "job": {"name": "nightly"}}


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No token or URL from the environment; a fresh working directory."""
    for name in ("STELLWERK_TOKEN", "STELLWERK_API_URL", "STELLWERK_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(NIGHTLY)
    (folder / "report.json").write_text('{"name": "report", "tasks": [{"name": "r", '
                                        '"type": "noop"}]}')
    (folder / "notes.txt").write_text("not a spec")
    return folder


def test_a_directory_s_specs_go_by_name_and_each_change_is_a_line(
    canned_api: CannedApi, specs: Path,
) -> None:
    canned_api.reply("PUT", "/api/v1/jobs/nightly", (200, changed(
        "updated", {"path": "tasks.a.retries", "before": 0, "after": 3})))
    canned_api.reply("PUT", "/api/v1/jobs/report", (201, {**changed("created", {
        "path": "tasks.r", "before": None, "after": {"type": "noop"}}), "job": {
        "name": "report"}}))
    result = stellwerk(canned_api.url, "apply", str(specs))
    assert result.exit_code == 0, result.output
    sent = canned_api.calls("PUT", "/api/v1/jobs/nightly")[0]["body"]
    assert sent["schedule"] == {"cron": "30 2 * * *"}
    assert len(canned_api.requests) == 2  # notes.txt is no spec
    assert "nightly" in result.output and "updated" in result.output
    assert "~ tasks.a.retries: 0 -> 3" in result.output
    assert 'report' in result.output and '+ tasks.r: {"type": "noop"}' in result.output


def test_a_dry_run_asks_for_one_and_says_what_would_change(
    canned_api: CannedApi, specs: Path,
) -> None:
    canned_api.reply("PUT", "/api/v1/jobs/nightly?dry_run=true", (200, changed(
        "updated", {"path": "schedule", "before": None, "after": {"cron": "x"}}, dry_run=True)))
    result = stellwerk(canned_api.url, "apply", str(specs / "nightly.yaml"), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would be updated" in result.output


def test_a_spec_that_does_not_parse_stops_everything_before_anything_is_sent(
    canned_api: CannedApi, specs: Path,
) -> None:
    (specs / "broken.yaml").write_text("name: [unclosed\n")
    result = stellwerk(canned_api.url, "apply", str(specs))
    assert result.exit_code == 1
    assert "broken.yaml" in result.output and canned_api.requests == []


def test_a_spec_without_a_name_is_refused(canned_api: CannedApi, tmp_path: Path) -> None:
    (tmp_path / "anon.yaml").write_text("tasks: [{name: a, type: noop}]\n")
    result = stellwerk(canned_api.url, "apply", str(tmp_path / "anon.yaml"))
    assert result.exit_code == 1 and "needs a name" in result.output


def test_python_jobs_are_applied_from_module_attr(
    canned_api: CannedApi, tmp_path: Path,
) -> None:
    (tmp_path / "pipelines.py").write_text(
        "from stellwerk.sdk import Job\n"
        "nightly = Job('nightly', schedule={'cron': '30 2 * * *'})\n"
        "nightly.task('a', 'noop')\n")
    canned_api.reply("PUT", "/api/v1/jobs/nightly", (200, changed("unchanged")))
    result = stellwerk(canned_api.url, "apply", "pipelines:nightly")
    assert result.exit_code == 0, result.output
    sent = canned_api.calls("PUT", "/api/v1/jobs/nightly")[0]["body"]
    assert sent == {"name": "nightly", "schedule": {"cron": "30 2 * * *"},
                    "tasks": [{"name": "a", "type": "noop", "params": {}, "next": []}]}
    assert "nightly (pipelines:nightly): unchanged" in result.output
    missing = stellwerk(canned_api.url, "apply", "pipelines:nothing")
    assert missing.exit_code == 1 and "nothing" in missing.output
