// The run's task graph as SVG: boxes laid out by graph_layout.js, edges as curves, each
// box coloured by its task's state through a CSS class. update() recolours the boxes in
// place, so the picture changes live without being redrawn.

import { h, s } from "./dom.js";
import { layout } from "./graph_layout.js";

const NODE_W = 176;
const NODE_H = 48;
const COL_GAP = 64;
const ROW_GAP = 16;
const PAD = 12;
export const MAX_DRAWN = 400; // beyond this a graph is unreadable: the task table remains

const short = (text, length) => (text.length > length ? `${text.slice(0, length - 1)}…` : text);

/**
 * tasks: the job's tasks ({name, next}). onSelect(name) runs when a box is clicked.
 * Returns {element, update(runTasks), select(name)}.
 */
export function taskGraph(tasks, onSelect) {
  if (tasks.length > MAX_DRAWN) {
    const note = h("p", { class: "muted", text: `${tasks.length} tasks: too many to draw; see the table.` });
    return { element: note, update() {}, select() {} };
  }
  const { columns, at, edges } = layout(tasks);
  const tallest = Math.max(1, ...columns.map((members) => members.length));
  const point = (name) => {
    const { column, row } = at.get(name);
    const offset = ((tallest - columns[column].length) * (NODE_H + ROW_GAP)) / 2;
    return { x: PAD + column * (NODE_W + COL_GAP), y: PAD + offset + row * (NODE_H + ROW_GAP) };
  };
  const width = PAD * 2 + columns.length * (NODE_W + COL_GAP) - COL_GAP;
  const height = PAD * 2 + tallest * (NODE_H + ROW_GAP) - ROW_GAP;
  const nodes = new Map(tasks.map((task) => [task.name, node(task.name, point(task.name), onSelect)]));
  const element = s("svg", {
    class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "task graph, left to right",
  },
  s("defs", null, s("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }))),
  edges.map(([from, to]) => edge(point(from), point(to))),
  [...nodes.values()].map((entry) => entry.group));

  return {
    element,
    update(runTasks) {
      for (const task of runTasks) nodes.get(task.name)?.show(task);
    },
    select(name) {
      for (const [key, entry] of nodes) entry.group.classList.toggle("selected", key === name);
    },
  };
}

function edge(from, to) {
  const x1 = from.x + NODE_W;
  const y1 = from.y + NODE_H / 2;
  const x2 = to.x;
  const y2 = to.y + NODE_H / 2;
  const mid = (x1 + x2) / 2;
  return s("path", { class: "edge", d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" });
}

function node(name, { x, y }, onSelect) {
  const detail = s("text", { class: "detail", x: 10, y: 38 });
  const title = s("title", { text: name });
  const group = s("g", {
    class: "node state-WAITING", "data-task": name, "data-state": "WAITING",
    transform: `translate(${x} ${y})`, tabindex: 0, role: "button",
  },
  title,
  s("rect", { width: NODE_W, height: NODE_H, rx: 6 }),
  s("text", { class: "name", x: 10, y: 19, text: short(name, 22) }),
  detail);
  group.addEventListener("click", () => onSelect(name));
  group.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") onSelect(name);
  });
  const show = (task) => {
    group.classList.remove(`state-${group.dataset.state}`);
    group.classList.add(`state-${task.state}`);
    group.dataset.state = task.state;
    detail.textContent = task.attempt > 1 ? `${task.state} · attempt ${task.attempt}` : task.state;
    title.textContent = `${name}: ${task.state}`;
    group.setAttribute("aria-label", `${name}: ${task.state}`);
  };
  return { group, show };
}
