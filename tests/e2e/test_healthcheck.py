"""``stellwerk healthcheck``: what compose runs in each component's container."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from .conftest import System

pytestmark = pytest.mark.e2e


def healthcheck(
    system: System, component: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", "healthcheck", component, *args],
        env={**system.env, **env}, capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.mark.parametrize("component", ["engine", "beat", "worker", "notify"])
def test_a_running_component_is_healthy(system: System, component: str) -> None:
    deadline = time.monotonic() + 30  # the first records are written within seconds
    result = healthcheck(system, component)
    while result.returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        result = healthcheck(system, component)
    assert result.returncode == 0, result.stderr


def test_a_component_with_no_sign_of_life_is_unhealthy(system: System) -> None:
    result = healthcheck(system, "engine", "--host", "no-such-host")
    assert result.returncode == 1
    assert "no sign of life of the engine" in result.stderr


def test_unreachable_servers_are_unhealthy_with_a_one_line_reason(system: System) -> None:
    result = healthcheck(system, "notify", STELLWERK_REDIS_URL="redis://127.0.0.1:1/0")
    assert result.returncode == 1
    assert result.stderr.startswith("error: Redis does not answer")
    assert len(result.stderr.strip().splitlines()) == 1
