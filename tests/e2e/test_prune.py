"""``stellwerk prune --older-than`` (issue 14): old history goes on demand, as a user runs it.

The e2e system is shared with every other e2e test, so the prune here is made with a
token bound to a tenant of the test's own: nothing of theirs can go.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import httpx
import pytest

from .conftest import System, submit, wait_run

pytestmark = pytest.mark.e2e


def prune(system: System, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``stellwerk prune ARGS`` with ``token`` (never the admin's: it would prune everyone's)."""
    argv = [sys.executable, "-m", "scheduler.cli.main", "prune", *args,
            "--api-url", system.base.removesuffix("/api/v1"), "--token", token]
    return subprocess.run(argv, env=system.env, capture_output=True, text=True, timeout=60,
                          check=False)


def tenant_token(api: httpx.Client, tenant: str) -> str:
    """A token of the job scope bound to ``tenant``."""
    created = api.post("/tokens", json={"name": "pruner", "scopes": ["job"], "tenant": tenant})
    assert created.status_code == 201, created.text
    return str(created.json()["token"])


def finished_runs(api: httpx.Client, tenant: str, count: int) -> tuple[str, list[str]]:
    """A job of ``tenant`` with ``count`` finished runs, oldest first."""
    job = submit(api, {"name": "pruned", "tenant": tenant,
                       "tasks": [{"name": "t", "type": "noop"}]})
    runs = [job["run_id"]]
    wait_run(api, runs[0])
    for _ in range(count - 1):
        runs.append(api.post(f"/jobs/{job['id']}/runs").json()["id"])
        wait_run(api, runs[-1])
    return str(job["id"]), runs


def test_prune_deletes_finished_runs_but_each_jobs_last_and_other_tenants(
    api: httpx.Client, system: System,
) -> None:
    tenant, other = f"prune-{uuid.uuid4().hex[:6]}", f"prune-{uuid.uuid4().hex[:6]}"
    job, runs = finished_runs(api, tenant, 3)
    _, others = finished_runs(api, other, 1)

    pruned = prune(system, tenant_token(api, tenant), "--older-than", "0s", "--keep-runs", "1")

    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("deleted 2 runs that finished before ")
    assert f"tenant {tenant}; each job's last 1 runs kept" in pruned.stdout
    listed = api.get(f"/jobs/{job}/runs").json()["data"]
    assert [run["id"] for run in listed] == [runs[2]]
    assert api.get(f"/runs/{runs[0]}").status_code == 404
    assert api.get(f"/runs/{runs[0]}/journal").status_code == 404
    assert api.get(f"/runs/{others[0]}").json()["state"] == "COMPLETED"


def test_prune_refuses_an_age_without_a_unit(api: httpx.Client, system: System) -> None:
    refused = prune(system, tenant_token(api, "prune-refused"), "--older-than", "7")

    assert refused.returncode == 1
    assert refused.stderr.startswith("error: --older-than: expected a number and a unit")
