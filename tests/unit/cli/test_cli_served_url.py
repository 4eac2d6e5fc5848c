"""The client commands find a running ``stellwerk up`` by the URL it wrote (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scheduler.cli.client import resolve_connection
from scheduler.cli.main import build_app
from scheduler.cli.served_url import read_served_url, write_served_url
from scheduler.cli.up import without_password


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STELLWERK_API_URL", "STELLWERK_TOKEN", "STELLWERK_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_the_url_up_wrote_is_used_when_no_option_or_variable_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_served_url(tmp_path, "http://127.0.0.1:18380")
    assert read_served_url(tmp_path) == "http://127.0.0.1:18380"
    assert resolve_connection(None, None, tmp_path).api_url == "http://127.0.0.1:18380"

    monkeypatch.setenv("STELLWERK_API_URL", "http://elsewhere:9000")
    assert resolve_connection(None, None, tmp_path).api_url == "http://elsewhere:9000"
    assert resolve_connection("http://given:1", None, tmp_path).api_url == "http://given:1"


def test_without_a_running_up_the_default_is_used(tmp_path: Path) -> None:
    assert read_served_url(tmp_path) is None
    assert resolve_connection(None, None, tmp_path).api_url == "http://127.0.0.1:8080"


def test_an_unreachable_api_says_where_its_url_came_from_and_what_to_do(
    tmp_path: Path,
) -> None:
    write_served_url(tmp_path, "http://127.0.0.1:9")  # discard: nothing listens
    result = CliRunner().invoke(build_app(), ["show", "00000000-0000-4000-8000-000000000000",
                                              "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "cannot reach the API at http://127.0.0.1:9/api/v1" in said
    assert f"{tmp_path / 'api-url'}" in said and "stellwerk up" in said


def test_a_banner_shows_no_redis_password() -> None:
    assert without_password("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert without_password("redis://:s3cret@cache:6380/1") == "redis://:***@cache:6380/1"
    assert without_password("redis://me:pw@[::1]:1/0") == "redis://me:***@[::1]:1/0"
