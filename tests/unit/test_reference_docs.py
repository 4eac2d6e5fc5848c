"""The API and CLI references in ``docs/reference/`` are generated from the code and current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_references_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "reference" / "generate.py"), "--check"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_route_and_command_is_in_the_references() -> None:
    api = (ROOT / "docs" / "reference" / "api.md").read_text()
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for operation in ("`POST /api/v1/jobs`", "`POST /api/v1/runs/{run_id}/cancel`",
                      "`GET /api/v1/runs/{run_id}/tasks/{task}/logs`"):
        assert operation in api
    for command in ("`stellwerk up`", "`stellwerk submit`", "`stellwerk logs`",
                    "`stellwerk token create`", "`stellwerk job commit`"):
        assert command in cli
