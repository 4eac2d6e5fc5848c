// #/runs: runs of every job, newest first, filtered by state and trigger (GET /runs),
// with their durations; a page at a time ("Load more").

import { fill, h } from "./dom.js";
import { duration, when } from "./format.js";
import * as notice from "./notice.js";
import { pagedRows } from "./pages.js";
import { badge } from "./states.js";

const PAGE_SIZE = 50;
const RUN_STATES = ["READY", "ACTIVE", "CONFIRM", "PAUSED", "CANCEL_REQUESTED", "COMPLETED",
  "FAILED", "TIMEOUT", "CANCELED"];
const TRIGGERS = ["schedule", "catchup", "submit", "api"];

/** Render the runs page into `view`. */
export function runsPage(view) {
  const area = notice.area();
  const state = select("state", RUN_STATES);
  const trigger = select("trigger", TRIGGERS);
  const { rows, more, load } = pagedRows({
    path: "/runs", params: () => ({ state: state.value, trigger: trigger.value, limit: PAGE_SIZE }),
    rowOf: runRow, empty: "No run matches.", columns: 8, area,
  });
  const form = h("form", { class: "filters", role: "search" },
    h("label", null, "State ", state), h("label", null, "Trigger ", trigger),
    h("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load(false);
  });
  fill(view, h("div", { class: "toolbar" }, h("h2", { text: "Runs" })), form, area,
    h("table", { class: "runs all-runs" },
      h("thead", null, h("tr", null, ["Job", "Run", "State", "Progress", "Trigger", "Started", "Finished", "Duration"]
        .map((title) => h("th", { text: title })))), rows),
    more);
  load(false);
  return () => {};
}

function select(name, values) {
  return h("select", { name }, h("option", { value: "", text: "any" }),
    values.map((value) => h("option", { value, text: value })));
}

function runRow(run) {
  const progress = Object.entries(run.progress || {}).map(([s, n]) => `${n} ${s}`).join(", ");
  return h("tr", { "data-run": run.id },
    h("td", null, h("a", { href: `#/jobs/${run.job_id}`, text: run.job_name })),
    h("td", null, h("a", { href: `#/runs/${run.id}`, text: `#${run.number}` })),
    h("td", null, badge(run.state)), h("td", { class: "small", text: progress || "—" }),
    h("td", { text: run.trigger }), h("td", { text: when(run.started_at) }),
    h("td", { text: when(run.finished_at) }),
    h("td", { class: "duration", text: duration(run.started_at, run.finished_at) }));
}
