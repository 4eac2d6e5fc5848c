// The states of SPEC §3, and how they are shown: each state is a CSS class
// ("state-ACTIVE") whose colours app.css defines once for badges, nodes and the legend.

import { h } from "./dom.js";

export const TASK_STATES = [
  "WAITING", "READY", "ACTIVE", "CONFIRM", "COMPLETED", "SOFT_FAILED", "FAILED",
  "TIMEOUT", "SKIPPED", "REJECTED", "CANCELED", "PAUSED",
];

// What GET /jobs?state= takes: a run state, NEW for a job without runs, SCHEDULED or
// DISABLED for a cron job between runs.
export const JOB_STATES = [
  "NEW", "SCHEDULED", "DISABLED", "READY", "ACTIVE", "CONFIRM", "PAUSE_REQUESTED", "PAUSED",
  "CANCEL_REQUESTED", "CANCELED", "COMPLETED", "FAILED", "TIMEOUT",
];

export const RUN_TERMINAL = new Set(["COMPLETED", "FAILED", "TIMEOUT", "CANCELED"]);
export const TASK_TERMINAL = new Set([
  "COMPLETED", "FAILED", "TIMEOUT", "SKIPPED", "REJECTED", "CANCELED",
]);

/** A coloured label for a state. */
export function badge(state) {
  return h("span", { class: `badge state-${state}`, "data-state": state, text: state });
}

/** The colours of the task states, in the order a run goes through them. */
export function legend() {
  return h("ul", { class: "legend", "aria-label": "task states" },
    TASK_STATES.map((state) => h("li", null, badge(state))));
}
