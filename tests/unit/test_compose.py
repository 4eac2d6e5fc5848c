"""compose.yaml: every component (docs/architecture.md), from one image, and valid for Compose."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from scheduler.cli.main import build_app
from tests.conftest import skip_or_fail_in_ci

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = {"migrate", "api", "beat", "engine", "worker", "connector", "notify"}


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "compose.yaml").read_text()))


def test_every_component_is_a_service_of_the_one_image() -> None:
    services = compose()["services"]
    assert {"postgres", "redis"} | COMPONENTS <= set(services)
    for name in COMPONENTS:
        assert services[name]["image"] == "stellwerk:latest", name
        assert services[name]["command"][0] == name, name
        assert "STELLWERK_DATABASE_URL" in services[name]["environment"], name
    assert services["beat"]["deploy"]["replicas"] == 2
    for name in ("postgres", "redis", "api", "engine", "beat", "worker", "notify"):
        assert "healthcheck" in services[name], name
    for name in ("engine", "beat", "worker", "connector", "notify"):
        assert services[name]["healthcheck"]["test"] == ["CMD", "stellwerk", "healthcheck", name]


def test_every_component_restarts_and_the_worker_names_its_types() -> None:
    """A crashed component comes back by itself; the one-shot migrate must not loop.

    A worker without ``--types`` would serve no queue: its tasks would wait forever.
    """
    services = compose()["services"]
    for name in COMPONENTS - {"migrate"} | {"postgres", "redis"}:
        policy = services[name].get("restart") or services[name].get(
            "deploy", {}).get("restart_policy", {}).get("condition")
        assert policy in {"always", "unless-stopped", "on-failure", "any"}, (name, policy)
    assert services["migrate"].get("restart") in {"no", "on-failure"}
    command = [str(arg) for arg in services["worker"]["command"]]
    assert "--types" in command, command
    types = command[command.index("--types") + 1].split(",")
    assert types and all(t.strip() and not t.startswith("-") for t in types), command


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) or ``docker-compose`` (v1), whichever is installed."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 check=False).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_validates_the_file() -> None:
    command = compose_command()
    if command is None:
        skip_or_fail_in_ci("neither `docker compose` nor `docker-compose` is installed")
    env = {**os.environ, "STELLWERK_ADMIN_TOKEN": "validate-only"}
    result = subprocess.run([*command, "-f", str(ROOT / "compose.yaml"), "config", "-q"],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr


def test_the_images_entry_point_runs_each_services_command() -> None:
    """The image runs ``stellwerk <command>``: every service's command and its health
    check must parse as that program's arguments (``--help`` stops before running)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["stellwerk"]' in dockerfile
    services = compose()["services"]
    for name, service in services.items():
        if service.get("image") != "stellwerk:latest":
            continue
        checks = [list(service["command"])]
        test = service.get("healthcheck", {}).get("test", [])
        if test[:2] == ["CMD", "stellwerk"]:
            checks.append(test[2:])
        for argv in checks:
            result = CliRunner().invoke(build_app(), [*argv, "--help"])
            assert result.exit_code == 0, f"{name}: stellwerk {' '.join(argv)}: {result.output}"
