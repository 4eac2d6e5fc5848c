"""``stellwerk.client.Client``: the requests each method sends, and what it raises.

The API is an ``httpx.MockTransport``: each test says what it answers and sees what was
sent. The error texts are the ones the CLI prints after ``error:``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from stellwerk.client import (
    ApiError,
    Client,
    ClientError,
    StreamBroken,
    UnexpectedAnswer,
    Unreachable,
)

ROOT = "http://api.test"
Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, sent: list[httpx.Request] | None = None) -> Client:
    """A client whose requests ``handler`` answers; each request is kept in ``sent``."""

    def answer(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        return handler(request)

    return Client(ROOT, "t0k3n", transport=httpx.MockTransport(answer))


def answering(status: int, body: object = None, **headers: str) -> Handler:
    return lambda request: httpx.Response(status, json=body, headers=headers)


def problem(status: int, **fields: object) -> Handler:
    return answering(status, {"status": status, **fields},
                     **{"Content-Type": "application/problem+json"})


def test_the_base_url_gets_the_api_prefix_once() -> None:
    assert Client(ROOT).base_url == f"{ROOT}/api/v1/"
    assert Client(f"{ROOT}/api/v1/").base_url == f"{ROOT}/api/v1/"


def test_an_error_answer_raises_the_problem_s_detail() -> None:
    with pytest.raises(ApiError) as raised:
        client(problem(404, title="Not Found", detail="run r1 not found")).run("r1")

    assert str(raised.value) == "404 run r1 not found"
    assert (raised.value.status, raised.value.detail) == (404, "run r1 not found")


def test_validation_errors_are_one_line_with_their_location_but_body() -> None:
    errors = [{"loc": ["body", "tasks", 0, "type"], "msg": "Field required"},
              {"loc": ["query", "limit"], "msg": "too big"}, "plain", {"msg": "no location"}]

    with pytest.raises(ApiError) as raised:
        client(problem(422, title="Unprocessable", detail=errors)).submit({"name": "n"})

    assert str(raised.value) == (
        "422 tasks.0.type: Field required; query.limit: too big; plain; no location")


@pytest.mark.parametrize(("handler", "said"), [
    (problem(409, title="Refused"), "409 Refused"),  # no detail: the title
    (lambda request: httpx.Response(502, text="<html>proxy</html>"), "502 Bad Gateway"),
    (answering(500, ["not", "a", "problem"]), "500 Internal Server Error"),
])
def test_an_error_answer_without_detail_says_its_title_or_status_line(
    handler: Handler, said: str,
) -> None:
    with pytest.raises(ApiError, match=f"^{said}$"):
        client(handler).job("nightly")


def test_a_204_is_no_answer_and_no_error() -> None:
    sent: list[httpx.Request] = []

    api = client(lambda request: httpx.Response(204), sent)

    api.revoke_token("tok 1")  # an empty body: no UnexpectedAnswer
    assert api.commit("n") == {}
    assert (sent[0].method, sent[0].url.raw_path) == ("DELETE", b"/api/v1/tokens/tok%201")


def test_no_answer_raises_unreachable_naming_the_url() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(Unreachable) as raised:
        client(refuse).jobs()

    assert not isinstance(raised.value, ApiError) and isinstance(raised.value, ClientError)
    assert str(raised.value) == (
        f"cannot reach the API at {ROOT}/api/v1/: [Errno 111] Connection refused")


@pytest.mark.parametrize("handler", [
    answering(200, [1, 2, 3]),
    lambda request: httpx.Response(200, text="<html>login</html>"),
])
def test_an_answer_that_is_no_json_object_is_refused_naming_the_request(
    handler: Handler,
) -> None:
    with pytest.raises(UnexpectedAnswer, match=r"^unexpected answer from GET /runs/r1: '"):
        client(handler).run("r1")


def test_the_token_and_json_are_sent() -> None:
    sent: list[httpx.Request] = []

    client(answering(200, {"id": "r1", "state": "ACTIVE"}), sent).run("r1")

    assert sent[0].headers["Authorization"] == "Bearer t0k3n"
    assert sent[0].headers["Accept"] == "application/json"


# What each method sends: (call, method, path and query, body).
ROUTES: list[tuple[Callable[[Client], object], str, str, object]] = [
    (lambda api: api.jobs(limit=5, job_type="etl", labels=["team=a", "tier=1"]), "GET",
     "/api/v1/jobs?limit=5&type=etl&label=team%3Da&label=tier%3D1", None),
    (lambda api: api.submit({"name": "n"}), "POST", "/api/v1/jobs", {"name": "n"}),
    (lambda api: api.apply({"name": "a/b"}, dry_run=True), "PUT",
     "/api/v1/jobs/a%2Fb?dry_run=true", {"name": "a/b"}),
    (lambda api: api.job("a b"), "GET", "/api/v1/jobs/a%20b", None),
    (lambda api: api.patch_job("n", {"enabled": False}), "PATCH", "/api/v1/jobs/n",
     {"enabled": False}),
    (lambda api: api.commit("n"), "POST", "/api/v1/jobs/n/commit", None),
    (lambda api: api.delete_job("n", force=True), "DELETE", "/api/v1/jobs/n?force=true", None),
    (lambda api: api.delete_job("n"), "DELETE", "/api/v1/jobs/n", None),
    (lambda api: api.run_now("n"), "POST", "/api/v1/jobs/n/runs", None),
    (lambda api: api.runs("n", limit=3), "GET", "/api/v1/jobs/n/runs?limit=3", None),
    (lambda api: api.fire_times("n", count=2, after="2026-03-28T00:00:00Z"), "GET",
     "/api/v1/jobs/n/fire-times?count=2&after=2026-03-28T00%3A00%3A00Z", None),
    (lambda api: api.act("r1", "pause"), "POST", "/api/v1/runs/r1/pause", None),
    (lambda api: api.act("r1", "skip", task="load it"), "POST",
     "/api/v1/runs/r1/tasks/load%20it/skip", None),
    (lambda api: api.logs("r1", "load", attempt=2), "GET",
     "/api/v1/runs/r1/tasks/load/logs?attempt=2", None),
    (lambda api: api.processors(), "GET", "/api/v1/processors", None),
    (lambda api: api.limits(), "GET", "/api/v1/limits", None),
    (lambda api: api.set_limit("rate:github", 100, per=60.0), "PUT",
     "/api/v1/limits/rate:github", {"limit": 100, "per": 60.0, "weight": None}),
    (lambda api: api.delete_limit("type:render"), "DELETE", "/api/v1/limits/type:render", None),
    (lambda api: api.prune(timedelta(days=7), keep_runs=3), "POST", "/api/v1/prune",
     {"older_than_s": 604800.0, "keep_runs": 3, "tenant": None}),
    (lambda api: api.subscriptions(), "GET", "/api/v1/subscriptions?limit=500", None),
    (lambda api: api.create_subscription(["run.*"], {}, {"celery_task": "t"}), "POST",
     "/api/v1/subscriptions",
     {"events": ["run.*"], "selector": {}, "target": {"celery_task": "t"}}),
    (lambda api: api.delete_subscription("s1"), "DELETE", "/api/v1/subscriptions/s1", None),
    (lambda api: api.create_token("ci", ["job.read"], expires_at=datetime(2030, 1, 2, tzinfo=UTC)),
     "POST", "/api/v1/tokens", {"name": "ci", "scopes": ["job.read"], "tenant": None,
                                "expires_at": "2030-01-02T00:00:00+00:00"}),
    (lambda api: api.tokens(limit=7), "GET", "/api/v1/tokens?limit=7", None),
]


@pytest.mark.parametrize(("call", "method", "target", "body"), ROUTES,
                         ids=[f"{m} {t}" for _, m, t, _ in ROUTES])
def test_each_method_sends_its_route(
    call: Callable[[Client], object], method: str, target: str, body: object,
) -> None:
    sent: list[httpx.Request] = []

    call(client(answering(200, {}), sent))

    (request,) = sent
    assert (request.method, request.url.raw_path.decode()) == (method, target)
    assert (json.loads(request.content) if request.content else None) == body


# -- the streams

def streaming(*chunks: bytes, then: Exception | None = None, **headers: str) -> Handler:
    """Answers 200 with ``chunks`` one by one, then ends, or breaks off raising ``then``."""

    def body() -> Iterator[bytes]:
        yield from chunks
        if then is not None:
            raise then

    return lambda request: httpx.Response(200, content=body(), headers=headers)


SSE = (b": ping\n\n", b"id: 1-0\nevent: task.active\ndata: {\"event\": \"task.active\"}\n\n",
       b"data: {\"event\":\ndata:  \"run.done\"}\n\n")


def test_events_are_decoded_and_keep_alives_skipped() -> None:
    sent: list[httpx.Request] = []

    with client(streaming(*SSE), sent).events(run_id="r1", job_id="j1") as stream:
        events = list(stream)

    assert events == [{"event": "task.active"}, {"event": "run.done"}]
    assert sent[0].url.raw_path == b"/api/v1/events?run_id=r1&job_id=j1"
    assert sent[0].headers["Accept"] == "text/event-stream"


def test_a_run_s_events_without_its_history_ask_for_none() -> None:
    sent: list[httpx.Request] = []
    with client(streaming(*SSE), sent).events(run_id="r1", history=False) as stream:
        list(stream)

    assert sent[0].url.raw_path == b"/api/v1/events?run_id=r1&history=false"


def test_a_stream_that_breaks_off_raises_stream_broken() -> None:
    broken = streaming(SSE[1], then=httpx.ReadError("connection reset"))

    with pytest.raises(StreamBroken) as raised, client(broken).events() as stream:
        assert next(stream) == {"event": "task.active"}
        next(stream)

    assert raised.value.reason == "connection reset"
    assert str(raised.value) == f"the event stream from {ROOT}/api/v1/ broke: connection reset"


def test_an_event_that_is_no_json_object_is_refused() -> None:
    with pytest.raises(UnexpectedAnswer, match="from GET /events: 'oops'"), \
            client(streaming(b"data: oops\n\n")).events() as stream:
        list(stream)


def test_a_refused_stream_raises_the_problem_before_any_event() -> None:
    refused = problem(403, title="Forbidden", detail="token lacks scope job.read")

    with pytest.raises(ApiError, match="^403 token lacks scope job.read$"), \
            client(refused).events():
        pytest.fail("a refused stream was opened")


def test_a_followed_log_is_the_text_as_it_comes() -> None:
    sent: list[httpx.Request] = []
    api = client(streaming(b"one\n", b"two\n"), sent)

    assert list(api.follow_logs("r1", "tick", attempt=1)) == ["one\n", "two\n"]
    assert sent[0].url.raw_path == b"/api/v1/runs/r1/tasks/tick/logs?follow=true&attempt=1"
    assert sent[0].headers["Accept"] == "text/plain"


def test_a_followed_log_that_breaks_off_says_so() -> None:
    api = client(streaming(b"one\n", then=httpx.RemoteProtocolError("peer closed")))

    with pytest.raises(StreamBroken, match="^the log stream from .* broke: peer closed$"):
        list(api.follow_logs("r1", "tick"))
