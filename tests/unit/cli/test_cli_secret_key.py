"""``stellwerk up`` keeps one secret key per data directory: stored secrets stay readable."""

import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from scheduler.cli.errors import CliError
from scheduler.cli.secret_key import load_or_create_secret_key, secret_key_path


def test_a_key_is_generated_once_private_and_reused(tmp_path: Path) -> None:
    first = load_or_create_secret_key(tmp_path, None)
    assert len(first) >= 40
    assert stat.S_IMODE(secret_key_path(tmp_path).stat().st_mode) == 0o600
    assert load_or_create_secret_key(tmp_path, None) == first


def test_a_configured_key_wins_and_is_not_written(tmp_path: Path) -> None:
    assert load_or_create_secret_key(tmp_path, SecretStr("configured")) == "configured"
    assert not secret_key_path(tmp_path).exists()


def test_an_empty_key_file_is_an_error_not_a_new_key(tmp_path: Path) -> None:
    secret_key_path(tmp_path).write_text("\n")
    with pytest.raises(CliError, match="unreadable"):
        load_or_create_secret_key(tmp_path, None)
