// #/jobs/<id>: a job's definition (tasks and params; secure params never leave the
// API), its schedule with the next fire times, its runs, and run now / enable / disable.

import { actionButton } from "./actions.js";
import { call } from "./api.js";
import { fill, h } from "./dom.js";
import { duration, pretty, schedule, seconds, when } from "./format.js";
import * as notice from "./notice.js";
import { pagedRows } from "./pages.js";
import { mayChange } from "./session.js";
import { badge } from "./states.js";

/** Render the job page into `view`. */
export function jobPage(view, jobId) {
  const area = notice.area();
  const head = h("div");
  const body = h("div");
  const runs = runList(jobId);
  const load = async () => {
    const job = await call(`/jobs/${jobId}`);
    fill(head, h("h2", null, `Job ${job.name} `, badge(job.state)),
      h("div", { class: "actions" }, jobActions(job, area, load)), area);
    fill(body, definition(job), scheduleSection(job), h("h3", { text: "Tasks" }), taskTable(job.tasks));
  };
  const grid = h("div", { class: "history" });
  fill(head, area); // until the job is read: where an error shows
  fill(view, head, body, h("h3", { text: "History" }), grid, h("h3", { text: "Runs" }), runs.element);
  load().catch((error) => notice.show(area, error.message));
  runs.load(false);
  call(`/jobs/${jobId}/history?limit=30`).then((history) => fill(grid, historyGrid(history)))
    .catch((error) => notice.show(area, error.message));
  return () => {};
}

/** The last runs (rows, newest first) by the job's tasks (columns), coloured by state. */
function historyGrid(history) {
  if (!history.runs.length) return h("p", { class: "muted", text: "No run yet." });
  return h("table", { class: "grid", "aria-label": "run history" },
    h("thead", null, h("tr", null, h("th", { text: "Run" }), h("th", { text: "State" }),
      history.tasks.map((task) => h("th", { class: "task", text: task })), h("th", { text: "Duration" }))),
    h("tbody", null, history.runs.map((run) => h("tr", { "data-run": run.id },
      h("td", null, h("a", { href: `#/runs/${run.id}`, text: `#${run.number}` })),
      h("td", null, badge(run.state)),
      history.tasks.map((task) => {
        const state = run.tasks[task];
        return h("td", { class: "cell" }, h("span", {
          class: `square state-${state || "NONE"}`, title: `${task}: ${state || "—"}`,
          "data-state": state || "",
        }));
      }),
      h("td", { text: duration(run.started_at, run.finished_at) })))));
}

function jobActions(job, area, reload) {
  if (!mayChange()) return [];
  const runNow = actionButton("Run now", async () => {
    const run = await call(`/jobs/${job.id}/runs`, { method: "POST" });
    window.location.hash = `#/runs/${run.id}`;
  }, { area, name: "run-now" });
  const toggle = actionButton(job.enabled ? "Disable" : "Enable",
    () => call(`/jobs/${job.id}`, { method: "PATCH", json: { enabled: !job.enabled } }),
    { area, done: reload, name: job.enabled ? "disable" : "enable" });
  return [runNow, toggle];
}

function definition(job) {
  const row = (term, value) => [h("dt", { text: term }), h("dd", { text: value })];
  const labels = Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  return h("section", null,
    job.description ? h("p", { text: job.description }) : null,
    h("dl", { class: "facts" },
      row("Id", job.id), row("Type", job.type || "—"), row("Application", job.application || "—"),
      row("Tenant", job.tenant || "—"), row("Owner", job.owner || "—"), row("Labels", labels || "—"),
      row("Priority", job.priority), row("Canary", job.canary ? "yes" : "no"),
      row("Failure threshold", job.failure_threshold), row("Timeout", seconds(job.timeout)),
      row("Version", job.version), row("Created", when(job.created_at))),
    h("h3", { text: "Params" }), h("pre", { class: "json", text: pretty(job.params) }),
    Object.keys(job.storage || {}).length
      ? [h("h3", { text: "Storage" }), h("pre", { class: "json", text: pretty(job.storage) })] : null);
}

function scheduleSection(job) {
  const fires = job.next_fire_times || [];
  return h("section", null,
    h("h3", { text: "Schedule" }),
    h("p", { text: `${schedule(job.schedule)}${job.enabled ? "" : " — disabled"}` }),
    job.schedule?.cron ? h("p", { class: "muted", text: `catch-up ${job.catchup}, overlap ${job.overlap}` }) : null,
    fires.length ? h("ol", { class: "fires", "aria-label": "next fire times" },
      fires.map((at) => h("li", { text: `${when(at)} (${at})` }))) : null);
}

function taskTable(tasks) {
  return h("table", { class: "tasks" },
    h("thead", null, h("tr", null, ["Task", "Type", "Next", "Params", "Retries", "Timeout", "Confirm"]
      .map((title) => h("th", { text: title })))),
    h("tbody", null, tasks.map((task) => h("tr", null,
      h("td", { text: task.name }), h("td", { text: task.type }),
      h("td", { text: task.next.join(", ") || "—" }),
      h("td", null, h("pre", { class: "json small", text: pretty(task.params) })),
      h("td", { text: task.retries }), h("td", { text: seconds(task.timeout) }),
      h("td", { text: task.confirm ? "yes" : "no" })))));
}

function runList(jobId) {
  const area = notice.area();
  const { rows, more, load } = pagedRows({
    path: `/jobs/${jobId}/runs`, params: () => ({ limit: 20 }),
    rowOf: runRow, empty: "No run yet.", columns: 6, area,
  });
  const element = h("div", null, area, h("table", { class: "runs" },
    h("thead", null, h("tr", null, ["Run", "State", "Trigger", "Scheduled", "Started", "Finished"]
      .map((title) => h("th", { text: title })))), rows), more);
  return { element, load };
}

function runRow(run) {
  return h("tr", { "data-run": run.id },
    h("td", null, h("a", { href: `#/runs/${run.id}`, text: `#${run.number}` })),
    h("td", null, badge(run.state)), h("td", { text: run.trigger }),
    h("td", { text: when(run.scheduled_for) }), h("td", { text: when(run.started_at) }),
    h("td", { text: when(run.finished_at) }));
}
