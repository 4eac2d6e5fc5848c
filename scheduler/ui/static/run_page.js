// #/runs/<id>: the run's task graph coloured by state and kept current from the live
// stream (polling each second without it), the run's actions, and one task in detail.

import { runActions } from "./actions.js";
import { ApiError, call } from "./api.js";
import { fill, h } from "./dom.js";
import { duration, when } from "./format.js";
import { taskGraph } from "./graph.js";
import { watch } from "./live.js";
import * as notice from "./notice.js";
import { RUN_TERMINAL, badge, legend } from "./states.js";
import { taskPanel } from "./task_panel.js";

/** Render the run page into `view`; returns what stops its stream and log. */
export function runPage(view, runId) {
  const controller = new AbortController();
  const page = {
    runId, selected: null, run: null, graph: null,
    title: h("h2", { text: "Run" }), mode: h("span", { class: "mode", "data-mode": "connecting", text: "connecting…" }),
    actions: h("div", { class: "actions" }), area: notice.area(), facts: h("p", { class: "muted" }),
    graphBox: h("div", { class: "graph-box" }), table: h("div"), gantt: h("div"),
  };
  const refresh = async () => render(page, await call(`/runs/${runId}`));
  page.refresh = refresh;
  page.panel = taskPanel(runId, { refresh });
  fill(view, page.title, h("div", { class: "toolbar" }, page.actions, page.mode), page.area,
    page.facts, page.graphBox, legend(), h("h3", { text: "Tasks" }), page.table,
    h("h3", { text: "Durations" }), page.gantt, page.panel.element);
  start(page, controller.signal).catch((error) => notice.show(page.area, error.message));
  return () => {
    controller.abort();
    page.panel.stop();
  };
}

async function start(page, signal) {
  const run = await call(`/runs/${page.runId}`, { signal });
  const select = (name) => {
    page.selected = name;
    page.graph.select(name);
    page.panel.show(page.run, name);
  };
  const { name, tasks } = await jobGraph(run, signal);
  page.jobName = name;
  page.graph = taskGraph(tasks, select);
  fill(page.graphBox, page.graph.element);
  page.select = select;
  page.signal = signal;
  render(page, run);
}

/** Keep the page current while the run goes on; say "finished" once it has ended. */
function follow(page) {
  if (RUN_TERMINAL.has(page.run.state)) {
    page.mode.dataset.mode = "finished";
    page.mode.textContent = "finished";
    return;
  }
  if (page.following || !page.signal) return;
  page.following = true;
  // Only what happens from now on: each event is a cue to read the run again (and the
  // stream's opening one more), so a replay of the run so far would be read for nothing
  // (some 40,000 events for a 10,000-task run).
  watch(`/events?run_id=${encodeURIComponent(page.runId)}&history=false`, page.refresh, {
    signal: page.signal,
    done: () => {
      const over = RUN_TERMINAL.has(page.run.state);
      if (over) page.following = false; // a retry from this page starts following again
      return over;
    },
    showMode: (mode) => {
      if (RUN_TERMINAL.has(page.run.state)) return;
      page.mode.dataset.mode = mode;
      page.mode.textContent = mode === "live" ? "● live" : "polling every second";
    },
  });
}

/** The job's name and tasks with their edges (a run lists its tasks without them). */
async function jobGraph(run, signal) {
  const unconnected = (tasks) => tasks.map((task) => ({ name: task.name, next: [] }));
  try {
    const job = await call(`/jobs/${run.job_id}`, { signal });
    const known = new Set(job.tasks.map((task) => task.name));
    // A task the job no longer has (changed since this run began) is drawn unconnected.
    const gone = run.tasks.filter((task) => !known.has(task.name));
    return { name: job.name, tasks: [...job.tasks, ...unconnected(gone)] };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { name: "its job", tasks: unconnected(run.tasks) };
  }
}

function render(page, run) {
  page.run = run;
  fill(page.title, `Run ${run.number} of `,
    h("a", { href: `#/jobs/${run.job_id}`, class: "job-link", text: page.jobName }), " ", badge(run.state));
  page.title.dataset.state = run.state;
  fill(page.actions, runActions(run, { area: page.area, done: page.refresh }));
  const counts = Object.entries(run.progress).filter(([, n]) => n).map(([state, n]) => `${n} ${state}`);
  fill(page.facts, [`trigger ${run.trigger}`, `scheduled ${when(run.scheduled_for)}`,
    `started ${when(run.started_at)}`, `finished ${when(run.finished_at)}`,
    counts.join(", ") || "no tasks"].join(" · "));
  page.graph.update(run.tasks);
  fill(page.table, taskTable(run, page.select));
  fill(page.gantt, gantt(run));
  if (page.selected) page.panel.show(run, page.selected);
  follow(page);
}

/** Each task's attempt as a bar on the run's time line: when it started, how long. */
function gantt(run) {
  const started = run.tasks.filter((task) => task.started_at);
  if (!started.length) return h("p", { class: "muted", text: "No task has started yet." });
  const now = Date.now();
  const from = Math.min(...started.map((task) => Date.parse(task.started_at)));
  const to = Math.max(...started.map((task) => (task.finished_at ? Date.parse(task.finished_at) : now)));
  const span = Math.max(to - from, 1);
  return h("div", { class: "gantt", role: "img", "aria-label": "task durations" },
    started.map((task) => {
      const start = Date.parse(task.started_at) - from;
      const end = (task.finished_at ? Date.parse(task.finished_at) : now) - from;
      const bar = h("span", {
        class: `bar state-${task.state}`,
        title: `${task.name}: ${duration(task.started_at, task.finished_at)}`,
      });
      // Through the CSSOM: the page's CSP refuses style attributes.
      bar.style.left = `${(100 * start) / span}%`;
      bar.style.width = `${Math.max((100 * (end - start)) / span, 0.5)}%`;
      return h("div", { class: "gantt-row", "data-task": task.name },
        h("span", { class: "gantt-name", text: task.name }),
        h("span", { class: "gantt-track" }, bar),
        h("span", { class: "gantt-time", text: duration(task.started_at, task.finished_at) }));
    }));
}

function taskTable(run, select) {
  return h("table", { class: "tasks" },
    h("thead", null, h("tr", null, ["Task", "Type", "State", "Attempt", "Worker", "Started", "Finished", "Message"]
      .map((title) => h("th", { text: title })))),
    h("tbody", null, run.tasks.map((task) => h("tr", { "data-task": task.name },
      h("td", null, h("button", { type: "button", class: "link", text: task.name, onclick: () => select(task.name) })),
      h("td", { text: task.type }), h("td", null, badge(task.state)), h("td", { text: task.attempt }),
      h("td", { text: task.worker || "—" }), h("td", { text: when(task.started_at) }),
      h("td", { text: when(task.finished_at) }), messageCell(task)))));
}

/** The task's message; for a READY task nobody can start, why it waits (issue 14). */
function messageCell(task) {
  if (task.message || !task.waiting_for) return h("td", { text: task.message });
  return h("td", null, h("span", { class: "waiting", text: task.waiting_for }));
}
