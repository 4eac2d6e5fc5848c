"""The web UI in headless Chromium against real processes (issue 6, acceptance).

Debian's ``chromium`` (``apt-get install -y chromium``) driven by Playwright for Python:
no browser download. A person logs in with the admin token, submits a split/join job
with a canary, watches the graph change colour as the run goes, confirms the canary
from the page, sees the run complete and reads a task's log; a ``job.read`` token sees
no action at all. Screenshots of the run page go to ``tests/artifacts/web-ui/`` (or
``$STELLWERK_TEST_ARTIFACTS/web-ui``); the path is printed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import in_ci, skip_or_fail_in_ci
from tests.e2e.conftest import ADMIN_TOKEN, System, journal, submit

try:
    from playwright import sync_api
    from playwright.sync_api import Browser, Locator, Page, expect
except ImportError:  # a dev dependency; the ``browser`` fixture says what is missing
    sync_api = None  # type: ignore[assignment]


def _chromium() -> str | None:
    candidates = [os.environ.get("STELLWERK_TEST_CHROMIUM"), shutil.which("chromium"),
                  shutil.which("chromium-browser"), "/usr/bin/chromium"]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _missing() -> str | None:
    """What this module lacks to run, said as how to get it; None when nothing."""
    if sync_api is None:
        return "playwright is not installed: pip install -e '.[dev]'"
    if CHROMIUM is None:
        return ("no chromium executable: apt-get install -y chromium "
                "(or set STELLWERK_TEST_CHROMIUM)")
    return None


CHROMIUM = _chromium()
MISSING = _missing()
pytestmark = [
    pytest.mark.e2e,
    # Locally a missing tool skips before the session's processes start; in CI the
    # ``browser`` fixture fails the test instead (``skip_or_fail_in_ci``).
    pytest.mark.skipif(MISSING is not None and not in_ci(), reason=str(MISSING)),
]
ARTIFACTS = Path(os.environ.get("STELLWERK_TEST_ARTIFACTS")
                 or Path(__file__).parents[1] / "artifacts") / "web-ui"
RUN_TIMEOUT_MS = 60_000
# Records every state a graph node is given, in the page itself (installed before the
# graph exists; routes change the hash, not the document): proof that the colours
# changed in this document, without a reload.
RECORD_CHANGES = """() => {
  window.__changes = [];
  new MutationObserver((records) => {
    for (const r of records) {
      const { task, state } = r.target.dataset;
      if (r.target.closest("svg.graph")) window.__changes.push([task, state]);
    }
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ["data-state"]});
}"""


def canary_spec(name: str) -> dict[str, Any]:
    """start (shell, prints) → three sleeps (one type: the canary) → join."""
    sleeps = [f"sleep-{i}" for i in (1, 2, 3)]
    return {
        "name": name, "canary": True,
        "tasks": [
            {"name": "start", "type": "shell", "next": sleeps,
             "params": {"argv": ["python3", "-c", "print('preparing the batch')"]}},
            *({"name": s, "type": "sleep", "params": {"seconds": 1.5}, "next": ["join"]}
              for s in sleeps),
            {"name": "join", "type": "noop"},
        ],
    }


def as_yaml(spec: dict[str, Any]) -> str:
    """The spec in YAML, as a person would paste it (the API converts it)."""
    import yaml

    return str(yaml.safe_dump(spec, sort_keys=False))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if MISSING is not None:
        skip_or_fail_in_ci(MISSING)
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: Chromium's sandbox cannot start as root (CI runs as root).
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"],
        )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nweb UI screenshots: {ARTIFACTS}")  # noqa: T201
    return ARTIFACTS


@pytest.fixture
def page(browser: Browser, system: System) -> Iterator[Page]:
    """A fresh browser tab (its own sessionStorage); page errors fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" and
           "status of 4" not in m.text else None)  # an expected 4xx is logged by Chromium
    yield tab
    context.close()
    assert errors == [], errors


def ui_url(system: System) -> str:
    return system.base.removesuffix("/api/v1") + "/"


def log_in(page: Page, system: System, token: str) -> None:
    page.goto(ui_url(system))
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()


def node(page: Page, task: str) -> Locator:
    return page.locator(f'svg.graph g.node[data-task="{task}"]')


def test_a_person_runs_a_canary_job_from_the_browser(
    page: Page, system: System, artifacts: Path,
) -> None:
    log_in(page, system, ADMIN_TOKEN)
    expect(page.locator("#who")).to_contain_text("admin")
    page.get_by_role("link", name="Submit a job").click()
    submit_a_refused_spec(page)

    name = f"ui-canary-{uuid.uuid4().hex[:6]}"
    page.evaluate(RECORD_CHANGES)
    page.evaluate("window.__sameDocument = true")
    page.get_by_label("job spec, JSON or YAML").fill(as_yaml(canary_spec(name)))
    with page.expect_request(lambda request: "/events?" in request.url) as streamed:
        page.get_by_role("button", name="Submit").click()
        page.wait_for_url("**/#/runs/*")
    run_id = page.url.rsplit("/", 1)[1]
    # The page reads the run, then wants to know when to read it again: no replay.
    assert f"run_id={run_id}&history=false" in streamed.value.url
    expect(node(page, "join")).to_be_visible()
    expect(page.locator(".mode")).to_have_attribute("data-mode", "live")

    canary_name = confirm_the_canary(page, name, artifacts)
    assert_the_graph_changed_live(page, canary_name)

    with page.expect_request(lambda request: "/journal" in request.url) as asked:
        node(page, "start").click()
    assert "task=start" in asked.value.url  # the task's entries, not the run's journal
    expect_the_task_journal(page, system, run_id, "start")
    expect(page.locator("pre.log")).to_contain_text("preparing the batch")
    expect(page.locator("pre.log")).to_have_attribute("data-state", "ended")
    page.screenshot(path=str(artifacts / "run-task-log.png"), full_page=True)
    find_the_job_by_name(page, name, run_id, artifacts)


def expect_the_task_journal(page: Page, system: System, run_id: str, task: str) -> None:
    """The task panel lists the task's journal entries, as the API gives them, and no
    other task's."""
    with system.client() as api:
        entries = journal(api, run_id)
    own = [e for e in entries if e["task"] == task]
    assert own and len(own) < len(entries)
    rows = page.locator("table.journal tbody tr")
    expect(rows).to_have_count(len(own))
    for row, entry in zip(rows.all(), own, strict=True):
        expect(row).to_contain_text(f"{entry['to']}{entry['reason']}{entry['actor']}")


def submit_a_refused_spec(page: Page) -> None:
    """A refused spec: the API's 422 is shown, naming the task and the field."""
    page.get_by_label("job spec, JSON or YAML").fill(
        "name: broken\ntasks:\n  - {name: a, type: noop, next: [nowhere]}\n")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator(".notice.error")).to_contain_text("422")
    expect(page.locator(".notice.error")).to_contain_text("nowhere")


def confirm_the_canary(page: Page, name: str, artifacts: Path) -> str:
    """One sleep runs, then waits for a person; the others wait for it. Confirmed here."""
    canary = page.locator('svg.graph g.node.state-CONFIRM[data-task^="sleep-"]')
    expect(canary).to_have_count(1, timeout=RUN_TIMEOUT_MS)
    canary_name = canary.get_attribute("data-task")
    assert canary_name is not None, "the canary's node names no task"
    # The colours themselves (the stylesheet's): amber for CONFIRM, grey for WAITING.
    expect(node(page, canary_name).locator("rect")).to_have_css("fill", "rgb(245, 158, 11)")
    expect(node(page, "join").locator("rect")).to_have_css("fill", "rgb(229, 231, 235)")
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    page.screenshot(path=str(artifacts / "run-canary-confirm.png"), full_page=True)

    node(page, canary_name).click()
    page.locator('button[data-action="task-confirm"]').click()
    expect(page.locator("h2[data-state]")).to_have_attribute(
        "data-state", "COMPLETED", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("svg.graph g.node.state-COMPLETED")).to_have_count(5)
    page.screenshot(path=str(artifacts / "run-completed.png"), full_page=True)
    return canary_name


def assert_the_graph_changed_live(page: Page, canary_name: str) -> None:
    """Every node went through its states in this document, without a reload."""
    shown: dict[str, list[str]] = {}
    for task, state in page.evaluate("window.__changes"):
        if shown.setdefault(task, [state])[-1] != state:
            shown[task].append(state)
    assert shown["join"][0] == "WAITING" and shown["join"][-1] == "COMPLETED", shown
    assert shown[canary_name][-2:] == ["CONFIRM", "COMPLETED"], shown
    others = [f"sleep-{i}" for i in (1, 2, 3) if f"sleep-{i}" != canary_name]
    assert all(shown[task][0] == "WAITING" and len(shown[task]) > 1 for task in others), shown
    assert page.evaluate("window.__sameDocument") is True  # no reload: updated live


def find_the_job_by_name(page: Page, name: str, run_id: str, artifacts: Path) -> None:
    """The job is found by a part of its name in the list, and its page lists the run."""
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_label("Name").fill(name.upper()[3:])
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()  # one page only
    page.screenshot(path=str(artifacts / "jobs-search.png"), full_page=True)
    page.get_by_role("link", name=name).click()
    expect(page.locator(f'table.runs a[href="#/runs/{run_id}"]')).to_be_visible()
    page.screenshot(path=str(artifacts / "job-page.png"), full_page=True)


def test_the_pages_for_many_runs_runs_workers_history_and_durations(
    page: Page, system: System, artifacts: Path,
) -> None:
    """Issue 17: runs across jobs, the workers, a job's history as a grid, a run's task
    durations, the jobs list's last and next run, and "finished" on a finished run."""
    name = f"ui-many-{uuid.uuid4().hex[:6]}"
    spec = {"name": name, "draft": True, "schedule": {"cron": "0 3 * * *"}, "tasks": [
        {"name": "fetch", "type": "noop", "next": ["render"]},
        {"name": "render", "type": "sleep", "params": {"seconds": 0.5}, "next": ["ship"]},
        {"name": "ship", "type": "noop"}]}
    with system.client() as api:
        job = submit(api, spec)
        assert api.post(f"/jobs/{name}/commit").status_code == 200
        runs = [api.post(f"/jobs/{name}/runs").json()["id"] for _ in range(2)]
        for run_id in runs:
            wait_state(api, run_id, "COMPLETED")
    log_in(page, system, ADMIN_TOKEN)

    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Filter").click()
    row = page.locator(f'table.jobs tr[data-job="{job["id"]}"]')
    expect(row.locator(".last-run")).to_contain_text("#2")
    expect(row.locator(".next-run")).not_to_have_text("—")
    page.screenshot(path=str(artifacts / "jobs-last-next-run.png"), full_page=True)

    page.get_by_role("link", name="Runs", exact=True).click()
    listed = page.locator(f'table.all-runs tr[data-run="{runs[1]}"]')
    expect(listed.locator("td.duration")).not_to_have_text("—")
    page.screenshot(path=str(artifacts / "runs-page.png"), full_page=True)

    page.goto(ui_url(system) + f"#/jobs/{job['id']}")
    grid = page.locator("table.grid")
    expect(grid.locator("tbody tr")).to_have_count(2)
    expect(grid.locator('.square[data-state="COMPLETED"]')).to_have_count(6)
    page.screenshot(path=str(artifacts / "job-history-grid.png"), full_page=True)

    page.goto(ui_url(system) + f"#/runs/{runs[0]}")
    expect(page.locator(".gantt .gantt-row")).to_have_count(3)
    expect(page.locator(".mode")).to_have_attribute("data-mode", "finished")
    expect(page.locator(".mode")).to_have_text("finished")
    page.screenshot(path=str(artifacts / "run-durations.png"), full_page=True)

    page.get_by_role("link", name="Workers", exact=True).click()
    expect(page.locator("table.workers tbody tr[data-worker]").first).to_be_visible()
    expect(page.locator("table.workers")).to_contain_text("noop")
    page.screenshot(path=str(artifacts / "workers-page.png"), full_page=True)


def test_a_read_only_token_sees_no_action(page: Page, system: System, artifacts: Path) -> None:
    with system.client() as api:
        reader = api.post("/tokens", json={"name": "ui-reader", "scopes": ["job.read"]})
        assert reader.status_code == 201, reader.text
        job = submit(api, canary_spec(f"ui-readonly-{uuid.uuid4().hex[:6]}"))
        wait_state(api, job["run_id"], "CONFIRM")  # where an admin has the most buttons

    log_in(page, system, reader.json()["token"])
    expect(page.locator("#who")).to_contain_text("job.read")
    expect(page.locator("table.jobs tbody tr").first).to_be_visible()
    assert page.get_by_role("link", name="Submit a job").count() == 0

    page.goto(ui_url(system) + f"#/runs/{job['run_id']}")
    expect(page.locator("h2[data-state]")).to_have_attribute("data-state", "CONFIRM")
    page.locator("svg.graph g.node.state-CONFIRM").first.click()
    expect(page.locator(".task-panel h3")).to_be_visible()
    page.screenshot(path=str(artifacts / "run-read-only.png"), full_page=True)
    assert page.locator("button.action, [data-action]").count() == 0

    page.goto(ui_url(system) + f"#/jobs/{job['id']}")
    expect(page.get_by_role("heading", name=job["name"])).to_be_visible()
    assert page.locator("button.action, [data-action]").count() == 0


def test_the_run_page_polls_when_the_event_stream_is_unavailable(
    page: Page, system: System,
) -> None:
    """The run waits for a confirmation while the page is read: a run that finished
    first (a 1 s task did, once, in CI) shows "finished", never "polling"."""
    page.route("**/api/v1/events*", lambda route: route.fulfill(status=404, body="{}"))
    with system.client() as api:
        job = submit(api, {"name": f"ui-poll-{uuid.uuid4().hex[:6]}", "tasks": [
            {"name": "a", "type": "noop", "confirm": True, "next": ["b"]},
            {"name": "b", "type": "noop"}]})
        log_in(page, system, ADMIN_TOKEN)
        page.goto(ui_url(system) + f"#/runs/{job['run_id']}")
        expect(page.locator(".mode")).to_have_attribute("data-mode", "polling")
        assert api.post(f"/runs/{job['run_id']}/tasks/a/confirm").status_code == 200
    expect(node(page, "b")).to_have_attribute("data-state", "COMPLETED", timeout=RUN_TIMEOUT_MS)


def test_a_task_of_a_type_no_worker_serves_says_so_on_the_run_page(
    page: Page, system: System,
) -> None:
    lonely = f"lonely_{uuid.uuid4().hex[:6]}"
    with system.client() as api:
        job = submit(api, {"name": f"ui-unserved-{lonely}", "tasks": [
            {"name": "a", "type": "noop", "next": ["b"]}, {"name": "b", "type": lonely}]})
        assert job["warnings"] == [f"no worker serves type {lonely!r}: its tasks wait READY "
                                   "until one starts or their outcome is posted"]
        wait_task_state(api, job["run_id"], "b", "READY")
    log_in(page, system, ADMIN_TOKEN)
    page.goto(ui_url(system) + f"#/runs/{job['run_id']}")
    row = page.locator('table.tasks tr[data-task="b"]')
    expect(row.locator(".waiting")).to_have_text(f"no worker serves type {lonely!r}")


def test_a_task_flow_control_holds_back_says_why_on_the_run_page(
    page: Page, system: System, artifacts: Path,
) -> None:
    """Issue 16: a held task's reason (``waiting_for``) on the run page, as in the API."""
    key = f"db-{uuid.uuid4().hex[:6]}"
    limit = [{"key": key, "limit": 1}]
    with system.client() as api:
        job = submit(api, {"name": f"ui-held-{key}", "tasks": [
            {"name": name, "type": "sleep", "params": {"seconds": 3}, "concurrency": limit}
            for name in ("first", "second")]})
        held = wait_held(api, job["run_id"])
    log_in(page, system, ADMIN_TOKEN)
    page.goto(ui_url(system) + f"#/runs/{job['run_id']}")
    row = page.locator(f'table.tasks tr[data-task="{held}"]')
    expect(row.locator(".waiting")).to_have_text(f"concurrency {key} 1/1")
    page.screenshot(path=str(artifacts / "run-held-by-flow-control.png"), full_page=True)


def wait_held(api: httpx.Client, run_id: str, timeout_s: float = 30) -> str:
    """The name of the run's first task that flow control holds back."""
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for task in api.get(f"/runs/{run_id}").json()["tasks"]:
            if task["state"] == "READY" and task.get("waiting_for"):
                return str(task["name"])
        time.sleep(0.1)
    raise AssertionError(f"no task of run {run_id} was held back")


def wait_task_state(
    api: httpx.Client, run_id: str, task: str, state: str, timeout_s: float = 60
) -> None:
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        tasks = {t["name"]: t["state"] for t in api.get(f"/runs/{run_id}").json()["tasks"]}
        if tasks[task] == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"task {task} of run {run_id} never reached {state}")


def wait_state(api: httpx.Client, run_id: str, state: str, timeout_s: float = 60) -> None:
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if api.get(f"/runs/{run_id}").json()["state"] == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} never reached {state}")


LAYOUT = """async () => {
  const { layout } = await import("./ui/graph_layout.js");
  const { at, columns, edges } = layout([
    {name: "a", next: ["b", "c"]}, {name: "b", next: ["d"]}, {name: "c", next: ["x", "d"]},
    {name: "x", next: ["d"]}, {name: "d", next: ["gone"]}, {name: "lone", next: []},
  ]);
  return { columns, edges: edges.length, d: at.get("d") };
}"""
SSE = """async () => {
  const { SseParser } = await import("./ui/sse.js");
  const parser = new SseParser();
  const chunks = [": keep-alive\\n\\nevent: run.started\\nid: 1-0\\ndata: {\\"a\\"", ":1}\\r",
                  "\\n\\r\\ndata: x\\ndata: y\\n", "\\n"];
  return chunks.map((chunk) => parser.feed(chunk));
}"""

# Forty events 10 ms apart while each re-read takes 30 ms: re-read at most every 150 ms
# (the gap asked for here), never two at once, and once more after the last event.
COALESCED = """async () => {
  const { coalesced } = await import("./ui/live.js");
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const starts = [];
  let running = 0, most = 0;
  const kick = coalesced(async () => {
    starts.push(performance.now());
    most = Math.max(most, ++running);
    await sleep(30);
    running -= 1;
  }, { minGapMs: 150 });
  let lastKick = 0, last = null;
  for (let i = 0; i < 40; i += 1) {
    lastKick = performance.now();
    last = kick();
    await sleep(10);
  }
  await last;
  const gaps = starts.slice(1).map((at, i) => at - starts[i]);
  return { count: starts.length, most, smallestGap: Math.min(...gaps),
           lastAfterLastKick: starts[starts.length - 1] >= lastKick };
}"""


def test_the_graph_layout_and_the_event_parser_in_the_browser(
    page: Page, system: System,
) -> None:
    """The UI's pure modules, run where they run: in Chromium."""
    page.goto(ui_url(system))
    laid = page.evaluate(LAYOUT)
    # Columns by longest path: d comes after x, which comes after c; edges to unknown
    # tasks are left out; a task without edges starts a column of its own row.
    assert laid["columns"] == [["a", "lone"], ["b", "c"], ["x"], ["d"]]
    assert laid["edges"] == 6 and laid["d"] == {"column": 3, "row": 0}
    assert page.evaluate(SSE) == [
        [], [], [{"event": "run.started", "id": "1-0", "data": '{"a":1}'}],
        [{"event": "message", "id": None, "data": "x\ny"}],
    ]
    spaced = page.evaluate(COALESCED)
    # Re-read after each event, the 40 gave 15 reads (one every 30 ms); spaced, 3 or 4.
    assert 2 <= spaced["count"] <= 6, spaced
    assert spaced["smallestGap"] >= 145 and spaced["most"] == 1, spaced
    assert spaced["lastAfterLastKick"], spaced
