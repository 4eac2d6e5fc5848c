// A task's log, followed live: GET .../logs?follow=true streams the lines as plain text
// as the workers report them and ends when the task is done (CONFIRM or terminal), so
// one request serves a finished task and a running one alike.

import { call } from "./api.js";
import { h } from "./dom.js";

/** Stream the log of `task` into `pre` until it ends or the signal aborts. */
export async function followLog(runId, task, pre, signal) {
  pre.textContent = "";
  pre.dataset.state = "following";
  const path = `/runs/${runId}/tasks/${encodeURIComponent(task)}/logs?follow=true`;
  try {
    const response = await call(path, { signal, as: "response", headers: { Accept: "text/plain" } });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(value);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
    pre.dataset.state = "ended";
    if (!pre.textContent) pre.append(h("span", { class: "muted", text: "(no output)" }));
  } catch (error) {
    if (signal.aborted) return;
    pre.dataset.state = "error";
    pre.append(h("span", { class: "muted", text: `\n(log unavailable: ${error.message})` }));
  }
}
