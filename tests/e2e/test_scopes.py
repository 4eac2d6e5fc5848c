"""Issue 4 end to end: API tokens, scopes and tenant isolation over real processes."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from .conftest import System, journal, submit, wait_run

pytestmark = pytest.mark.e2e


def mint(api: httpx.Client, scopes: list[str], tenant: str | None = None) -> str:
    body = {"name": f"e2e-{uuid.uuid4().hex[:6]}", "scopes": scopes, "tenant": tenant}
    response = api.post("/tokens", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


@contextmanager
def as_token(system: System, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=system.base, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        yield client


def wait_state(api: httpx.Client, run_id: str, state: str, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    run: dict[str, Any] = {}
    while time.monotonic() < end:
        run = api.get(f"/runs/{run_id}").json()
        if run.get("state") == state:
            return
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {state}: {run}")


def confirm_job(name: str) -> dict[str, Any]:
    return {"name": name, "tasks": [
        {"name": "gate", "type": "noop", "confirm": True, "next": ["after"]},
        {"name": "after", "type": "noop"},
    ]}


def test_job_read_reads_and_changes_nothing(api: httpx.Client, system: System) -> None:
    job = submit(api, {"name": "readable", "tasks": [{"name": "a", "type": "noop"}]})
    run = wait_run(api, job["run_id"])
    with as_token(system, mint(api, ["job.read"])) as reader:
        assert reader.get(f"/jobs/{job['id']}").status_code == 200
        assert reader.get(f"/runs/{run['id']}/journal").status_code == 200
        assert job["id"] in {j["id"] for j in reader.get("/jobs?limit=500").json()["data"]}
        refused = [
            reader.post("/jobs", json={"name": "x", "tasks": [{"name": "a", "type": "noop"}]}),
            reader.post(f"/jobs/{job['id']}/runs"),
            reader.post(f"/runs/{run['id']}/retry"),
            reader.delete(f"/jobs/{job['id']}"),
        ]
    assert [r.status_code for r in refused] == [403] * 4
    assert all("needs scope 'job'" in r.json()["detail"] for r in refused)
    runs = api.get(f"/jobs/{job['id']}/runs").json()["data"]
    assert [r["id"] for r in runs] == [run["id"]]


def test_job_task_confirms_and_rejects_a_waiting_task_and_reads_nothing(
    api: httpx.Client, system: System,
) -> None:
    confirmed = submit(api, confirm_job("confirmed"))
    rejected = submit(api, confirm_job("rejected"))
    for job in (confirmed, rejected):
        wait_state(api, job["run_id"], "CONFIRM")

    with as_token(system, mint(api, ["job.task"])) as tasker:
        assert tasker.get(f"/runs/{confirmed['run_id']}").status_code == 403
        assert tasker.post(f"/runs/{confirmed['run_id']}/cancel").status_code == 403
        assert tasker.post(f"/runs/{confirmed['run_id']}/tasks/gate/skip").status_code == 403
        ok = tasker.post(f"/runs/{confirmed['run_id']}/tasks/gate/confirm")
        no = tasker.post(f"/runs/{rejected['run_id']}/tasks/gate/reject")

    assert (ok.status_code, no.status_code) == (200, 200), (ok.text, no.text)
    assert wait_run(api, confirmed["run_id"])["state"] == "COMPLETED"
    assert wait_run(api, rejected["run_id"])["state"] == "FAILED"
    actors = {e["actor"] for e in journal(api, confirmed["run_id"]) if e["task"] == "gate"}
    assert any(actor.startswith("token:e2e-") for actor in actors), actors


def test_job_creates_runs_and_cancels(api: httpx.Client, system: System) -> None:
    sleepy = {"name": "sleepy", "tasks": [{"name": "s", "type": "sleep",
                                          "params": {"seconds": 30}}]}
    with as_token(system, mint(api, ["job"])) as operator:
        created = operator.post("/jobs", json=sleepy)
        assert created.status_code == 201, created.text
        wait_state(operator, created.json()["run_id"], "ACTIVE")
        canceled = operator.post(f"/runs/{created.json()['run_id']}/cancel")
        assert canceled.status_code == 200, canceled.text
        assert wait_run(operator, created.json()["run_id"])["state"] == "CANCELED"


def test_tenants_see_and_act_on_their_own_jobs_only(api: httpx.Client, system: System) -> None:
    acme, globex = mint(api, ["job"], "acme"), mint(api, ["job"], "globex")
    with as_token(system, acme) as mine, as_token(system, globex) as theirs:
        created = mine.post("/jobs", json=confirm_job("acme-job"))
        assert created.status_code == 201, created.text
        job = created.json()
        wait_state(mine, job["run_id"], "CONFIRM")
        probes = [
            theirs.get(f"/jobs/{job['id']}"), theirs.get(f"/runs/{job['run_id']}"),
            theirs.get(f"/jobs/{job['id']}/runs"), theirs.post(f"/jobs/{job['id']}/runs"),
            theirs.post(f"/runs/{job['run_id']}/cancel"),
            theirs.post(f"/runs/{job['run_id']}/tasks/gate/confirm"),
            theirs.delete(f"/jobs/{job['id']}?force=true"),
        ]
        listed = theirs.get("/jobs?limit=500").json()["data"]
        smuggled = theirs.post("/jobs", json={**confirm_job("smuggled"), "tenant": "acme"})
        own = [j["id"] for j in mine.get("/jobs?limit=500").json()["data"]]
        confirmed = mine.post(f"/runs/{job['run_id']}/confirm")

    assert job["tenant"] == "acme"
    assert [p.status_code for p in probes] == [404] * len(probes)
    assert job["id"] not in {j["id"] for j in listed}
    assert {j["tenant"] for j in listed} <= {"globex"}
    assert smuggled.status_code == 403 and "bound to tenant 'globex'" in smuggled.json()["detail"]
    assert job["id"] in own
    assert confirmed.status_code == 200, confirmed.text
    assert wait_run(api, job["run_id"])["state"] == "COMPLETED"
    assert len(api.get(f"/jobs/{job['id']}/runs").json()["data"]) == 1


def test_the_cli_creates_a_token_that_works_until_it_expires(
    api: httpx.Client, system: System,
) -> None:
    env = {**system.env, "STELLWERK_API_URL": f"http://127.0.0.1:{system.port}",
           "STELLWERK_TOKEN": system.env["STELLWERK_ADMIN_TOKEN"]}
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", "token", "create", "--name", "cli",
         "--scope", "job.read", "--tenant", "cli-tenant", "--expires-in", "3s"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert "cannot be shown again" in done.stderr and token not in done.stderr

    with as_token(system, token) as cli:
        assert cli.get("/jobs").status_code == 200
        assert cli.post("/jobs", json=confirm_job("x")).status_code == 403
        end = time.monotonic() + 15
        status = 200
        while status == 200 and time.monotonic() < end:
            status = cli.get("/jobs").status_code
            time.sleep(0.2)
    assert status == 401
    listed = api.get("/tokens").json()["data"]
    assert any(t["name"] == "cli" and t["tenant"] == "cli-tenant" for t in listed)
