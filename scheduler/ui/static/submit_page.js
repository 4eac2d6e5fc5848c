// #/submit: paste a job spec (JSON or YAML) and submit it with POST /jobs. YAML is
// turned into JSON by the API (POST /job-specs/yaml): browsers cannot read it. The
// API's 422 is shown as it names the field, e.g. "tasks.1.next: ... (task 'b')".

import { ApiError, call } from "./api.js";
import { fill, h } from "./dom.js";
import * as notice from "./notice.js";

const EXAMPLE = `name: fan-out
canary: true
tasks:
  - {name: start, type: noop, next: [a, b]}
  - {name: a, type: sleep, params: {seconds: 2}, next: [join]}
  - {name: b, type: sleep, params: {seconds: 2}, next: [join]}
  - {name: join, type: noop}
`;

/** Render the submit form into `view`. */
export function submitPage(view) {
  const area = notice.area();
  const text = h("textarea", {
    name: "spec", rows: 18, spellcheck: "false", "aria-label": "job spec, JSON or YAML",
    placeholder: EXAMPLE,
  });
  const button = h("button", { type: "submit", "data-action": "submit", text: "Submit" });
  const form = h("form", { class: "submit" }, text, h("div", { class: "actions" }, button));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    notice.show(area, null);
    try {
      const job = await call("/jobs", { method: "POST", json: await specOf(text.value) });
      window.location.hash = job.run_id ? `#/runs/${job.run_id}` : `#/jobs/${job.id}`;
    } catch (error) {
      const refused = error instanceof ApiError ? `The API refused the job (${error.status}):\n` : "";
      notice.show(area, refused + error.message);
    } finally {
      button.disabled = false;
    }
  });
  fill(view, h("h2", { text: "Submit a job" }),
    h("p", { class: "muted", text: "A job spec as JSON or YAML (the format of `stellwerk submit`). "
      + "A job without a schedule runs at once; you are then taken to its run." }),
    form, area);
  return () => {};
}

/** The spec as an object: JSON as it is, anything else read as YAML by the API. */
async function specOf(source) {
  if (!source.trim()) throw new Error("Paste a job spec first.");
  try {
    return JSON.parse(source);
  } catch {
    return call("/job-specs/yaml", { method: "POST", text: source });
  }
}
