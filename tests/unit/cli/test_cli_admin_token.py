"""The admin token that ``stellwerk up`` generates once and keeps in the data dir."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from scheduler.cli.admin_token import load_or_create_admin_token, read_admin_token
from scheduler.cli.errors import CliError


def test_a_token_is_generated_once_with_mode_0600_and_reused(tmp_path: Path) -> None:
    first = load_or_create_admin_token(tmp_path, None)

    assert len(first) >= 32
    assert stat.S_IMODE((tmp_path / "admin-token").stat().st_mode) == 0o600
    assert load_or_create_admin_token(tmp_path, None) == first
    assert read_admin_token(tmp_path) == first


def test_a_configured_token_wins_and_is_not_written(tmp_path: Path) -> None:
    assert load_or_create_admin_token(tmp_path, SecretStr("configured")) == "configured"
    assert not (tmp_path / "admin-token").exists()
    assert read_admin_token(tmp_path) is None


def test_an_empty_token_file_is_an_error_not_silently_replaced(tmp_path: Path) -> None:
    (tmp_path / "admin-token").write_text("\n")
    with pytest.raises(CliError, match="admin-token is empty"):
        load_or_create_admin_token(tmp_path, None)
