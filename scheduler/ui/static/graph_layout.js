// Where each task of a graph goes, left to right: a task's column is the longest path
// from a start task to it, so every edge points right and a join sits after all of its
// branches. Within a column, tasks are ordered by where their predecessors are (one
// barycentre pass), which keeps a split's branches next to each other. Pure: no DOM.

/**
 * tasks: [{name, next: [names]}] (edges to unknown names are ignored).
 * Returns {columns: [[name]], at: Map(name -> {column, row}), edges: [[from, to]]}.
 */
export function layout(tasks) {
  const names = new Set(tasks.map((task) => task.name));
  const edges = [];
  const preds = new Map(tasks.map((task) => [task.name, []]));
  for (const task of tasks) {
    for (const next of task.next || []) {
      if (names.has(next)) {
        edges.push([task.name, next]);
        preds.get(next).push(task.name);
      }
    }
  }
  const column = longestPaths(tasks, preds);
  const columns = [];
  for (const task of tasks) {
    const index = column.get(task.name);
    (columns[index] ||= []).push(task.name);
  }
  const at = new Map();
  columns.forEach((members, index) => {
    const ordered = index === 0 ? members : byPredecessors(members, preds, at);
    columns[index] = ordered;
    ordered.forEach((name, row) => at.set(name, { column: index, row }));
  });
  return { columns, at, edges };
}

/** Column of each task: 0 for a start task, else 1 + the largest of its predecessors'. */
function longestPaths(tasks, preds) {
  const column = new Map();
  const waiting = new Map(tasks.map((task) => [task.name, preds.get(task.name).length]));
  const succs = new Map(tasks.map((task) => [task.name, []]));
  for (const [to, from] of preds) for (const name of from) succs.get(name).push(to);
  const ready = tasks.filter((task) => waiting.get(task.name) === 0).map((task) => task.name);
  for (const name of ready) column.set(name, 0);
  for (let i = 0; i < ready.length; i += 1) {
    const name = ready[i];
    for (const next of succs.get(name)) {
      column.set(next, Math.max(column.get(next) ?? 0, column.get(name) + 1));
      waiting.set(next, waiting.get(next) - 1);
      if (waiting.get(next) === 0) ready.push(next);
    }
  }
  // A cycle cannot be stored (the API refuses it); should one appear, show it in column 0.
  for (const task of tasks) if (!column.has(task.name)) column.set(task.name, 0);
  return column;
}

/** Members sorted by the mean row of their predecessors (stable for ties). */
function byPredecessors(members, preds, at) {
  const weight = (name) => {
    const rows = preds.get(name).map((pred) => at.get(pred)).filter(Boolean).map((p) => p.row);
    return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : 0;
  };
  return members
    .map((name, index) => ({ name, index, weight: weight(name) }))
    .sort((a, b) => a.weight - b.weight || a.index - b.index)
    .map((item) => item.name);
}
