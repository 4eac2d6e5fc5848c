// The actions a person takes on a run or a task (SPEC §3), as buttons. Which buttons
// show depends on the token's rights (a job.read token sees none) and, as a hint only,
// on the current state; the API decides, and its refusal (409) is shown as it says it.

import { call } from "./api.js";
import { h } from "./dom.js";
import { show } from "./notice.js";
import { mayChange, mayDecide } from "./session.js";

// Run actions worth offering in each run state (the engine's table has the last word).
const RUN_OFFERS = {
  READY: ["cancel"],
  ACTIVE: ["pause", "cancel"],
  CONFIRM: ["confirm", "reject", "pause", "cancel"],
  PAUSE_REQUESTED: ["cancel"],
  PAUSED: ["resume", "cancel"],
  FAILED: ["retry"],
  TIMEOUT: ["retry"],
  CANCELED: ["retry"],
};

const TASK_OFFERS = {
  CONFIRM: ["confirm", "reject"],
  WAITING: ["skip"],
  READY: ["skip"],
  PAUSED: ["skip"],
  FAILED: ["skip", "retry"],
  TIMEOUT: ["skip", "retry"],
  COMPLETED: ["retry"],
  SKIPPED: ["retry"],
  REJECTED: ["retry"],
  CANCELED: ["retry"],
};

/** A button that performs an action, then calls done(); a refusal goes to the area. */
export function actionButton(label, perform, { area, done, name }) {
  const button = h("button", { type: "button", class: "action", "data-action": name, text: label });
  button.addEventListener("click", async () => {
    button.disabled = true;
    show(area, null);
    try {
      await perform();
      if (done) await done();
    } catch (error) {
      show(area, `${label}: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

const capital = (word) => word[0].toUpperCase() + word.slice(1);

/** The run's action buttons for its state; none without the right to change runs. */
export function runActions(run, { area, done }) {
  if (!mayChange()) return [];
  const base = `/runs/${run.id}`;
  return (RUN_OFFERS[run.state] || []).map((action) => {
    const perform = action === "reject"
      ? () => rejectWaiting(run)
      : () => call(`${base}/${action}`, { method: "POST" });
    return actionButton(`${capital(action)} run`, perform, { area, done, name: `run-${action}` });
  });
}

/** The task's action buttons: confirm and reject need job.task, skip and retry job. */
export function taskActions(run, task, { area, done }) {
  const allowed = (action) => (["confirm", "reject"].includes(action) ? mayDecide() : mayChange());
  const path = `/runs/${run.id}/tasks/${encodeURIComponent(task.name)}`;
  return (TASK_OFFERS[task.state] || []).filter(allowed).map((action) => actionButton(
    `${capital(action)} ${task.name}`,
    () => call(`${path}/${action}`, { method: "POST" }),
    { area, done, name: `task-${action}` },
  ));
}

/** Rejecting the run: each task waiting for confirmation is rejected (the run fails). */
async function rejectWaiting(run) {
  for (let left = run.tasks.length; left > 0; left -= 1) {
    const current = await call(`/runs/${run.id}`); // the first reject may cancel the rest
    const task = current.tasks.find((candidate) => candidate.state === "CONFIRM");
    if (!task) return;
    await call(`/runs/${run.id}/tasks/${encodeURIComponent(task.name)}/reject`, { method: "POST" });
  }
}

/** Whether this token may take any action at all (else no button is ever shown). */
export function mayAct() {
  return mayChange() || mayDecide();
}
