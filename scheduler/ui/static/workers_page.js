// #/workers: every live worker (GET /workers): its host, the types it serves, how many
// tasks it runs at once, its last heartbeat, and the attempts it runs now.

import { call } from "./api.js";
import { fill, h } from "./dom.js";
import { duration, when } from "./format.js";
import * as notice from "./notice.js";

/** Render the workers page into `view`. */
export function workersPage(view) {
  const area = notice.area();
  const rows = h("tbody");
  const load = async () => {
    try {
      const workers = (await call("/workers")).data;
      fill(rows, workers.length ? workers.map(workerRow)
        : h("tr", null, h("td", { colspan: 5, class: "muted", text: "No live worker." })));
    } catch (error) {
      notice.show(area, error.message);
    }
  };
  fill(view, h("div", { class: "toolbar" }, h("h2", { text: "Workers" })), area,
    h("table", { class: "workers" },
      h("thead", null, h("tr", null, ["Host", "Types", "Concurrency", "Last heartbeat", "Running"]
        .map((title) => h("th", { text: title })))), rows));
  load();
  const timer = setInterval(load, 5000);
  return () => clearInterval(timer);
}

function workerRow(worker) {
  const running = worker.running.length
    ? h("ul", { class: "running" }, worker.running.map((item) => h("li", null,
      h("a", { href: `#/runs/${item.run_id}`, text: `${item.job_name} · ${item.task}` }),
      ` (attempt ${item.attempt}, ${duration(item.started_at)})`)))
    : h("span", { class: "muted", text: "idle" });
  return h("tr", { "data-worker": worker.hostname },
    h("td", { text: worker.hostname }), h("td", { text: worker.types.join(", ") }),
    h("td", { text: worker.concurrency ?? "—" }), h("td", { text: when(worker.seen_at) }),
    h("td", null, running));
}
