// One task of a run in detail: its state and actions, attempts, output, message,
// journal and log (followed live while it runs).

import { taskActions } from "./actions.js";
import { call, query } from "./api.js";
import { fill, h } from "./dom.js";
import { pretty, when } from "./format.js";
import * as notice from "./notice.js";
import { badge } from "./states.js";
import { followLog } from "./task_log.js";

/** The panel; show(run, name) fills it, again after every change of the run. */
export function taskPanel(runId, { refresh }) {
  const element = h("section", { class: "task-panel", "aria-live": "polite" });
  const area = notice.area();
  const journalBox = h("div");
  const logBox = h("pre", { class: "log", tabindex: 0 });
  let seen = null; // what was shown last: "name state attempt"
  let logFollow = null; // {name, attempt, controller}

  const followFrom = (task) => {
    if (logFollow && logFollow.name === task.name && logFollow.attempt === task.attempt) return;
    logFollow?.controller.abort();
    logFollow = { name: task.name, attempt: task.attempt, controller: new AbortController() };
    followLog(runId, task.name, logBox, logFollow.controller.signal);
  };

  const show = async (run, name) => {
    const task = run.tasks.find((candidate) => candidate.name === name);
    if (!task) return;
    const key = `${task.name} ${task.state} ${task.attempt} ${run.state}`;
    if (key === seen) return;
    seen = key;
    fill(element,
      h("h3", null, `Task ${task.name} `, badge(task.state)),
      h("div", { class: "actions" }, taskActions(run, task, { area, done: refresh })), area,
      facts(task),
      h("h4", { text: "Output" }), h("pre", { class: "json", text: task.output ? pretty(task.output) : "—" }),
      h("h4", { text: "Attempts and journal" }), journalBox,
      h("h4", null, "Log ", h("span", { class: "muted", text: "(live while the task runs)" })), logBox);
    followFrom(task);
    try {
      fill(journalBox, journalTable(await taskJournal(runId, task.name)));
    } catch (error) {
      fill(journalBox, h("p", { class: "muted", text: `journal unavailable: ${error.message}` }));
    }
  };

  const stop = () => logFollow?.controller.abort();
  return { element, show, stop };
}

function facts(task) {
  const row = (term, value) => [h("dt", { text: term }), h("dd", { text: value })];
  return h("dl", { class: "facts" },
    row("Type", task.type),
    row("Attempt", String(task.attempt)),
    row("Worker", task.worker || "—"),
    row("Started", when(task.started_at)),
    row("Finished", when(task.finished_at)),
    row("Message", task.message || "—"),
    ...(task.waiting_for ? row("Waiting for", task.waiting_for) : []));
}

/** Every page of one task's journal entries (a run's whole journal can be 40,000). */
async function taskJournal(runId, name) {
  const entries = [];
  let cursor = null;
  do {
    const page = await call(`/runs/${runId}/journal${query({ task: name, cursor })}`);
    entries.push(...page.entries);
    cursor = page.next_cursor;
  } while (cursor);
  return entries;
}

/** The task's journal, oldest first; each row says which attempt it belongs to. */
export function journalTable(entries) {
  if (!entries.length) return h("p", { class: "muted", text: "No state change yet." });
  return h("table", { class: "journal" },
    h("thead", null, h("tr", null, ["Time", "Attempt", "Change", "Reason", "By"].map((t) => h("th", { text: t })))),
    h("tbody", null, entries.map((entry) => h("tr", null,
      h("td", { text: when(entry.at) }),
      h("td", { text: entry.attempt ?? "—" }),
      h("td", null, badge(entry.from), " → ", badge(entry.to)),
      h("td", { text: entry.reason }),
      h("td", { text: entry.actor })))));
}
