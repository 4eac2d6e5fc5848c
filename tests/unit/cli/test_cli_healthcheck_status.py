"""``stellwerk healthcheck``: a component riding out an outage is unhealthy, and says why."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from common.health import StatusWriter, health_dir
from common.outage import Outage


def test_a_component_whose_status_names_a_server_down_is_unhealthy(tmp_path: Path) -> None:
    outage = Outage("Redis", logging.getLogger(__name__))
    outage.failed(ConnectionError("connection refused"))
    env = {**os.environ, "STELLWERK_DATA_DIR": str(tmp_path)}
    with StatusWriter(health_dir(tmp_path), "engine", lambda: [outage],
                      refresh=timedelta(hours=1)):
        result = subprocess.run(
            [sys.executable, "-m", "scheduler.cli.main", "healthcheck", "engine"],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: the engine is unhealthy: pid {os.getpid()} cannot reach Redis (for 0 s)"
    )
