// A table filled a page at a time from a list endpoint with `next_cursor` ("Load more").

import { call, query } from "./api.js";
import { fill, h } from "./dom.js";
import * as notice from "./notice.js";

/**
 * Rows of `path` (with the query `params()` gives) made by `rowOf`, `empty` said when
 * there are none; load(false) starts over, load(true) appends the next page.
 */
export function pagedRows({ path, params = () => ({}), rowOf, empty, columns, area }) {
  const rows = h("tbody");
  const more = h("button", { type: "button", class: "more", hidden: true, text: "Load more" });
  let cursor = null;
  const load = async (append) => {
    notice.show(area, null);
    try {
      const page = await call(`${path}${query({ ...params(), cursor: append ? cursor : null })}`);
      if (!append) fill(rows);
      rows.append(...page.data.map(rowOf));
      if (!append && !page.data.length) rows.append(h("tr", null, h("td", { colspan: columns, class: "muted", text: empty })));
      cursor = page.next_cursor;
      more.hidden = !cursor;
    } catch (error) {
      notice.show(area, error.message);
    }
  };
  more.addEventListener("click", () => load(true));
  return { rows, more, load };
}
