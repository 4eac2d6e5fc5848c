// #/jobs: the jobs, newest first, filtered as GET /jobs filters (state, type,
// application, tenant, a part of the name), a page at a time ("Load more").

import { fill, h } from "./dom.js";
import { schedule, when } from "./format.js";
import * as notice from "./notice.js";
import { pagedRows } from "./pages.js";
import { mayChange, who } from "./session.js";
import { JOB_STATES, badge } from "./states.js";

const PAGE_SIZE = 50;

/** Render the jobs page into `view`. */
export function jobsPage(view) {
  const area = notice.area();
  const form = filterForm();
  let filters = {};
  const { rows, more, load } = pagedRows({
    path: "/jobs", params: () => ({ ...filters, limit: PAGE_SIZE }),
    rowOf: jobRow, empty: "No job matches.", columns: 7, area,
  });
  form.element.addEventListener("submit", (event) => {
    event.preventDefault();
    filters = form.values();
    load(false);
  });

  fill(view,
    h("div", { class: "toolbar" }, h("h2", { text: "Jobs" }),
      mayChange() ? h("a", { href: "#/submit", class: "button", "data-action": "submit-job", text: "Submit a job" }) : null),
    form.element, area,
    h("table", { class: "jobs" },
      h("thead", null, h("tr", null, ["Name", "State", "Last run", "Next run", "Schedule", "Type", "Created"]
        .map((title) => h("th", { text: title })))),
      rows),
    more);
  load(false);
  return () => {};
}

function filterForm() {
  const bound = who()?.tenant;
  const field = (label, input) => h("label", null, label, input);
  const name = h("input", { name: "name", type: "search", placeholder: "part of the name" });
  const state = h("select", { name: "state" }, h("option", { value: "", text: "any" }),
    JOB_STATES.map((value) => h("option", { value, text: value })));
  const type = h("input", { name: "type", placeholder: "any" });
  const application = h("input", { name: "application", placeholder: "any" });
  const tenant = h("input", { name: "tenant", placeholder: "any", value: bound || "", disabled: Boolean(bound) });
  const element = h("form", { class: "filters", role: "search" },
    field("Name ", name), field("State ", state), field("Type ", type),
    field("Application ", application), field("Tenant ", tenant),
    h("button", { type: "submit", text: "Filter" }));
  const values = () => ({
    name: name.value.trim(), state: state.value, type: type.value.trim(),
    application: application.value.trim(), tenant: bound ? "" : tenant.value.trim(),
  });
  return { element, values };
}

function jobRow(job) {
  const last = job.latest_run;
  const lastRun = last
    ? h("span", null, h("a", { href: `#/runs/${last.id}`, text: `#${last.number}` }), " ", badge(last.state),
      ` ${when(last.finished_at || last.started_at)}`)
    : "—";
  return h("tr", { "data-job": job.id },
    h("td", null, h("a", { href: `#/jobs/${job.id}`, text: job.name })),
    h("td", null, badge(job.state)),
    h("td", { class: "last-run" }, lastRun),
    h("td", { class: "next-run", text: job.next_fire_at ? when(job.next_fire_at) : "—" }),
    h("td", { text: `${schedule(job.schedule)}${job.enabled ? "" : " (disabled)"}` }),
    h("td", { text: job.type || "—" }),
    h("td", { text: when(job.created_at) }));
}
