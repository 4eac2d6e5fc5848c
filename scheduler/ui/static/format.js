// How values are shown: times in the browser's time zone, JSON indented.

/** A local date and time ("2030-01-02 03:04:05"), or "—" for none. */
export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} `
    + `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** Seconds as "1.5 s", "2 min 5 s", "3 h 20 min". */
export function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 60) return `${Number(value.toFixed(2))} s`;
  if (value < 3600) return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
  return `${Math.floor(value / 3600)} h ${Math.round((value % 3600) / 60)} min`;
}

/** JSON, indented for reading. */
export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/** A schedule in words: "once, now", "at …", "cron … (zone)". */
export function schedule(value) {
  if (!value || (!value.cron && !value.at)) return "once, at creation";
  if (value.at) return `once, at ${when(value.at)}`;
  return `cron "${value.cron}" (${value.timezone || "UTC"})`;
}

/** How long from `startIso` to `endIso` (or to now, for what still runs): "1.5 s". */
export function duration(startIso, endIso) {
  if (!startIso) return "—";
  const end = endIso ? new Date(endIso) : new Date();
  return seconds(Math.max(0, (end - new Date(startIso)) / 1000));
}
