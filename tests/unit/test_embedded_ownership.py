"""Who stops an embedded server: the ownership rule, without starting any server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from common.config import load_settings
from common.embedded import EmbeddedServers, _claim, ensure_servers


def test_the_first_claim_makes_this_process_the_owner(tmp_path: Path) -> None:
    owner = tmp_path / "redis.owner"

    assert _claim(owner, force=False)
    assert owner.read_text() == f"{os.getpid()}\n"
    assert _claim(owner, force=False)  # claiming again is harmless


def test_a_live_owner_keeps_its_server(tmp_path: Path) -> None:
    owner = tmp_path / "redis.owner"
    owner.write_text(f"{os.getppid()}\n")

    assert not _claim(owner, force=False)
    assert owner.read_text() == f"{os.getppid()}\n"


def test_the_server_of_a_dead_owner_is_adopted(tmp_path: Path) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()
    owner = tmp_path / "redis.owner"
    owner.write_text(f"{finished.pid}\n")

    assert _claim(owner, force=False)
    assert owner.read_text() == f"{os.getpid()}\n"


def test_who_starts_a_server_owns_it_even_over_a_recorded_owner(tmp_path: Path) -> None:
    owner = tmp_path / "redis.owner"
    owner.write_text(f"{os.getppid()}\n")  # e.g. a stale pid that the kernel gave away

    assert _claim(owner, force=True)


def test_given_urls_start_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = load_settings(
        database_url="postgresql://db/x", redis_url="redis://r/0", data_dir=data_dir
    )

    assert ensure_servers(settings) == settings
    with EmbeddedServers(data_dir, database_url="postgresql://db/x", redis_url="redis://r/0"):
        pass
    assert not data_dir.exists()
