"""Subscriptions, webhooks and the live event stream over real processes (issue 5).

Local HTTP servers (``tests.webhook_receiver``) stand in for the subscribers. The
system's notify runner retries after 0.2 s, 0.4 s, ... (``STELLWERK_WEBHOOK_*`` in the
e2e environment), four tries at most, with a lease of 8 s on a delivery in flight.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from scheduler.notify.signing import verify
from tests.e2e.conftest import ADMIN_TOKEN, System, submit, wait_run
from tests.webhook_receiver import Receiver

SECRET = "e2e-webhook-secret"
QUIET_SPELL_S = 12  # two of the stream's 5 s reads, and past redis-py's 5 s socket timeout


def draft_job(api: httpx.Client, **fields: Any) -> dict[str, Any]:
    """A one-task job that runs only when committed, so it can be subscribed to first."""
    spec = {"name": f"notify-{uuid.uuid4().hex[:8]}", "draft": True,
            "tasks": [{"name": "a", "type": "noop"}], **fields}
    return submit(api, spec)


def subscribe(api: httpx.Client, url: str, events: list[str], **selector: Any) -> str:
    response = api.post("/subscriptions", json={
        "events": events, "selector": selector,
        "target": {"webhook": {"url": url, "secret": SECRET}},
    })
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def commit(api: httpx.Client, job_id: str) -> str:
    response = api.post(f"/jobs/{job_id}/commit")
    assert response.status_code == 200, response.text
    return str(response.json()["run_id"])


def deliveries(api: httpx.Client, subscription_id: str, count: int,
               timeout_s: float = 30) -> list[dict[str, Any]]:
    """The delivery log once ``count`` deliveries are there and none is pending."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = api.get(f"/subscriptions/{subscription_id}/deliveries")
        assert response.status_code == 200, response.text
        found = list(response.json()["data"])
        if len(found) == count and all(d["state"] != "pending" for d in found):
            return found
        assert time.monotonic() < deadline, f"deliveries: {found}"
        time.sleep(0.1)


def test_a_webhook_on_run_events_gets_started_before_completed_each_signed(
    api: httpx.Client,
) -> None:
    job = draft_job(api)
    with Receiver() as receiver:
        sid = subscribe(api, receiver.url, ["run.*"], job_id=job["id"])
        run_id = commit(api, job["id"])
        assert wait_run(api, run_id)["state"] == "COMPLETED"
        log = deliveries(api, sid, 4)  # scheduled, started, completed, done
        requests = receiver.wait_for(4)

    names = [r.event for r in requests]
    assert names.index("run.started") < names.index("run.completed")
    assert set(names) == {"run.scheduled", "run.started", "run.completed", "run.done"}
    for request in requests:
        assert verify(SECRET, request.headers["x-stellwerk-timestamp"], request.body,
                      request.headers["x-stellwerk-signature"])
        assert request.json["run_id"] == run_id
        assert request.json["event"] == request.event
        assert request.headers["x-stellwerk-event-id"] == request.json["id"]
    assert {d["id"] for d in log} == {r.headers["x-stellwerk-delivery"] for r in requests}
    assert all(d["state"] == "delivered" and len(d["attempts"]) == 1 for d in log)


def test_a_receiver_failing_twice_with_503_gets_the_event_on_the_third_try(
    api: httpx.Client,
) -> None:
    job = draft_job(api)
    with Receiver(statuses=[503, 503]) as receiver:
        sid = subscribe(api, receiver.url, ["run.completed"], job_id=job["id"])
        commit(api, job["id"])
        (delivery,) = deliveries(api, sid, 1)
        tries = receiver.wait_for(3)

    assert delivery["state"] == "delivered"
    assert [a["status_code"] for a in delivery["attempts"]] == [503, 503, 200]
    assert [a["number"] for a in delivery["attempts"]] == [1, 2, 3]
    assert all(a["duration_ms"] >= 0 and a["at"] for a in delivery["attempts"])
    assert {r.headers["x-stellwerk-delivery"] for r in tries} == {delivery["id"]}


def test_a_notify_runner_killed_mid_delivery_loses_no_event(
    api: httpx.Client, system: System,
) -> None:
    job = draft_job(api)
    with Receiver() as receiver:
        sid = subscribe(api, receiver.url, ["run.started"], job_id=job["id"])
        receiver.hold()  # the first POST hangs until the runner is dead
        try:
            commit(api, job["id"])
            (first,) = receiver.wait_for(1)
            system.stop("notify", kill=True)  # SIGKILL, mid-delivery
        finally:
            receiver.release()
            if "notify" not in system.procs:
                system.start("notify", "notify")
        second = receiver.wait_for(2, timeout_s=40)[1]  # after the claim's lease (8 s)
        (delivery,) = deliveries(api, sid, 1)

    assert first.headers["x-stellwerk-delivery"] == second.headers["x-stellwerk-delivery"]
    assert first.body == second.body
    assert delivery["state"] == "delivered"
    assert delivery["attempts"][-1]["status_code"] == 200


def test_get_events_streams_a_runs_events_live_and_resumes_after_an_id(
    system: System, api: httpx.Client,
) -> None:
    job = draft_job(api, tasks=[{"name": "a", "type": "noop", "next": ["b"]},
                                {"name": "b", "type": "sleep", "params": {"seconds": 0.5}}])
    with _stream(system, job_id=job["id"]) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        run_id = commit(api, job["id"])  # after the stream is open: nothing is missed
        seen = _read_until(response, "run.done")
    names = [name for _, name, _ in seen]
    assert names.index("run.started") < names.index("task.completed") < names.index(
        "run.completed")
    # The job's own job.created may come too: the notify runner relays it after the
    # create's commit, so on a busy machine after the stream opened. A draft has no run.
    created = [data for _, name, data in seen if name == "job.created"]
    assert all(data["job_id"] == job["id"] and data["run_id"] is None for data in created)
    assert all(data["run_id"] == run_id for _, name, data in seen
               if name not in ("run.scheduled", "job.created"))
    assert len({ident for ident, _, _ in seen}) == len(seen)

    started = next(ident for ident, name, _ in seen if name == "run.started")
    with _stream(system, run_id=run_id, last_event_id=started) as resumed:
        again = _read_until(resumed, "run.done")
    after = [ident for ident, _, _ in seen][[i for i, _, _ in seen].index(started) + 1:]
    assert [ident for ident, _, _ in again] == after


def test_a_run_s_stream_replays_what_happened_before_and_ends_with_its_final_event(
    system: System, api: httpx.Client,
) -> None:
    """Issue 17: connected mid-run, a client gets the run from its start, each change
    once, then the rest live; the stream closes after ``run.done``. Connected to a run
    that has ended, it gets the whole run and the stream closes."""
    job = draft_job(api, tasks=[{"name": "a", "type": "noop", "next": ["b"]},
                                {"name": "b", "type": "sleep", "params": {"seconds": 1.5}}])
    run_id = commit(api, job["id"])
    wait_until_task(api, run_id, "b", "ACTIVE")
    with _stream(system, run_id=run_id) as response:
        mid_run = _read_to_the_end(response)
    with _stream(system, run_id=run_id) as response:
        ended = _read_to_the_end(response)

    for seen in (mid_run, ended):
        names = [name for name, _ in seen]
        assert names[0] == "run.scheduled" and "run.started" in names, names
        assert names.index("run.started") < names.index("task.completed")
        assert names[-2:] == ["run.completed", "run.done"]
        assert names.count("task.completed") == 2 and names.count("run.done") == 1
        changes = [(d["event"], d["task"], d["attempt"], d["at"]) for _, d in seen]
        assert len(set(changes)) == len(changes)  # replayed and live: each change once
    assert [name for name, _ in mid_run] == [name for name, _ in ended]


def test_a_run_s_stream_without_history_sends_only_what_comes_after_it_opened(
    system: System, api: httpx.Client,
) -> None:
    """``history=false``, the web UI's run page: opened once ``b`` has started (its
    ``task.active`` seen on a stream of the job, so every event before it was in the
    live stream already), it sends nothing of before, the rest live, and closes after
    ``run.done``; opened on a run that has ended, it closes at once, empty."""
    job = draft_job(api, tasks=[{"name": "a", "type": "noop", "next": ["b"]},
                                {"name": "b", "type": "sleep", "params": {"seconds": 1.5}}])
    with _stream(system, job_id=job["id"]) as watching:
        run_id = commit(api, job["id"])
        next(message for message in _messages(watching, timeout_s=30)
             if message[1] == "task.active" and message[2]["task"] == "b")
        with _stream(system, run_id=run_id, history="false") as response:
            later = _read_to_the_end(response)
    with _stream(system, run_id=run_id, history="false") as response:
        ended = _read_to_the_end(response)

    assert [(name, data["task"]) for name, data in later] == [
        ("task.completed", "b"), ("run.completed", None), ("run.done", None)]
    assert ended == []


def wait_until_task(api: httpx.Client, run_id: str, task: str, state: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = {t["name"]: t["state"] for t in api.get(f"/runs/{run_id}").json()["tasks"]}
        if tasks[task] == state:
            return
        time.sleep(0.05)
    raise AssertionError(f"task {task} never {state}")


def _read_to_the_end(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """``(event, data)`` of each message until the server ends the stream."""
    # Keep-alives come every 15 s, so a stream that goes on fails the deadline.
    return [(event, data) for _, event, data in _messages(response, timeout_s=60)]


def test_a_stream_outlives_a_quiet_spell_longer_than_the_redis_socket_timeout(
    system: System, api: httpx.Client,
) -> None:
    """redis-py 8 gives up a read after 5 s by default; the stream's read blocks 5 s.

    The quiet spell is the point of the test, so it is waited out: the stream ended
    with a Redis TimeoutError after the first empty read (seen with ``submit --watch``).
    """
    job = draft_job(api)
    with _stream(system, job_id=job["id"]) as response:
        time.sleep(QUIET_SPELL_S)
        run_id = commit(api, job["id"])
        seen = _read_until(response, "run.done")
    assert {data["run_id"] for _, name, data in seen if name.startswith("run.")
            and name != "run.scheduled"} == {run_id}


def test_events_are_tenant_filtered_and_foreign_filters_are_404(
    system: System, api: httpx.Client,
) -> None:
    token = api.post("/tokens", json={"name": "acme-reader", "scopes": ["job.read"],
                                      "tenant": "acme-e2e"}).json()["token"]
    foreign = draft_job(api, tenant="globex-e2e")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=system.base, headers=headers, timeout=10) as client:
        assert client.get("/events", params={"job_id": foreign["id"]}).status_code == 404
        bad = client.get("/events", headers={"Last-Event-ID": "yesterday"})
        assert bad.status_code == 422
        assert "last-event-id" in bad.json()["detail"].lower()
        with client.stream("GET", "/events") as response:
            mine = draft_job(api, tenant="acme-e2e")
            commit(api, foreign["id"])
            commit(api, mine["id"])
            seen = _read_until(response, "run.done")
    assert {data["tenant"] for _, _, data in seen} == {"acme-e2e"}


def test_open_streams_hold_no_request_slot_and_no_database_connection(
    system: System, api: httpx.Client,
) -> None:
    """More streams than the API admits requests (16) and pools connections (16 + 10)."""
    token = api.post("/tokens", json={"name": "many-streams", "scopes": ["job.read"]}).json()
    with contextlib.ExitStack() as streams:
        for _ in range(30):  # an API token: authenticating each one uses the database
            client = streams.enter_context(_as(system, token["token"], timeout_s=2))
            response = streams.enter_context(client.stream("GET", "/events"))
            assert response.status_code == 200  # (a held connection: the 27th waits)
        with _as(system, token["token"], timeout_s=2) as client:
            assert client.get("/jobs", params={"limit": 1}).status_code == 200


def test_subscriptions_crud_with_scopes_and_tenant_404s(
    system: System, api: httpx.Client,
) -> None:
    acme = api.post("/tokens", json={"name": "acme", "scopes": ["job"],
                                     "tenant": "acme-e2e"}).json()["token"]
    reader = api.post("/tokens", json={"name": "r", "scopes": ["job.read"]}).json()["token"]
    theirs = subscribe(api, "http://127.0.0.1:9/x", ["*"], tenant="globex-e2e")
    body = {"events": ["run.failed"], "target": {"celery_task": "ops.alert"}}
    with _as(system, acme) as client:
        created = client.post("/subscriptions", json=body)
        assert created.status_code == 201, created.text
        mine = created.json()
        assert mine["selector"]["tenant"] == "acme-e2e"
        listed = {s["id"] for s in client.get("/subscriptions").json()["data"]}
        assert mine["id"] in listed and theirs not in listed
        assert client.get(f"/subscriptions/{theirs}").status_code == 404
        assert client.delete(f"/subscriptions/{theirs}").status_code == 404
        assert client.delete(f"/subscriptions/{mine['id']}").status_code == 204
        assert client.get(f"/subscriptions/{mine['id']}").status_code == 404
    with _as(system, reader) as client:
        assert client.post("/subscriptions", json=body).status_code == 403
        assert client.get(f"/subscriptions/{theirs}").status_code == 200
    assert api.get(f"/subscriptions/{theirs}").status_code == 200


def test_deleting_a_job_deletes_its_subscriptions_and_announces_it(api: httpx.Client) -> None:
    app = f"notify-e2e-{uuid.uuid4().hex[:6]}"
    job = draft_job(api, application=app)
    with Receiver() as receiver:
        watcher = subscribe(api, receiver.url, ["subscription.deleted"], application=app)
        doomed = subscribe(api, receiver.url, ["run.*"], job_id=job["id"])
        assert api.delete(f"/jobs/{job['id']}").status_code == 204
        assert api.get(f"/subscriptions/{doomed}").status_code == 404
        (announced,) = receiver.wait_for(1)
        assert api.delete(f"/subscriptions/{watcher}").status_code == 204

    assert announced.event == "subscription.deleted"
    assert announced.json["subscription_id"] == doomed
    assert announced.json["job_id"] == job["id"]


@contextlib.contextmanager
def _stream(system: System, *, last_event_id: str | None = None,
            **params: str) -> Iterator[httpx.Response]:
    """An open ``GET /events`` (as the admin), with its filters and ``Last-Event-ID``."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    with (
        httpx.Client(base_url=system.base, headers=headers, timeout=30) as client,
        client.stream("GET", "/events", params=params) as response,
    ):
        assert response.status_code == 200, response.read()
        yield response


def _as(system: System, token: str, timeout_s: float = 10) -> httpx.Client:
    return httpx.Client(base_url=system.base, headers={"Authorization": f"Bearer {token}"},
                        timeout=timeout_s)


def _read_until(response: httpx.Response, last: str,
                timeout_s: float = 30) -> list[tuple[str, str, dict[str, Any]]]:
    """``(id, event, data)`` of each message, until one named ``last`` (inclusive)."""
    seen: list[tuple[str, str, dict[str, Any]]] = []
    for message in _messages(response, timeout_s):
        seen.append(message)
        if message[1] == last:
            return seen
    raise AssertionError(f"the stream ended before {last}: {[n for _, n, _ in seen]}")


def _messages(response: httpx.Response,
              timeout_s: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(id, event, data)`` of each server-sent message, failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    names: list[str] = []
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        assert time.monotonic() < deadline, f"the stream went on: {names}"
        if line:
            key, _, value = line.partition(": ")
            fields[key] = value
            continue
        if "data" in fields:
            names.append(fields["event"])
            yield fields.get("id", ""), fields["event"], json.loads(fields["data"])
        fields = {}
