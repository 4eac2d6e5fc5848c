// Messages for the person: an action refused (409), a spec refused (422), a lost stream.

import { fill, h } from "./dom.js";

/** Show an error (kind "error") or a note in a notice area; null message clears it. */
export function show(area, message, kind = "error") {
  if (!message) {
    fill(area);
    area.hidden = true;
    return;
  }
  area.hidden = false;
  fill(area, h("div", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" },
    h("pre", { text: message })));
}

/** An empty notice area to put where the message belongs. */
export function area() {
  return h("div", { class: "notice-area", hidden: true });
}
