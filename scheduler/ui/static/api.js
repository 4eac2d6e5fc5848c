// Calls to the REST API with the session's bearer token. Errors come back as
// application/problem+json; ApiError carries the message to show (the 409 of an action,
// the 422 of a job spec naming the field).

import { token } from "./session.js";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problemText(problem));
    this.status = status;
    this.problem = problem;
  }
}

/** Where the API is: the page is told in a meta tag (it depends on the path prefix). */
export function apiBase() {
  return document.querySelector('meta[name="stellwerk-api"]').content;
}

/** "detail", then each validation error as "where: what" on its own line. */
export function problemText(problem) {
  const lines = [problem.detail || problem.title || "request failed"];
  for (const error of problem.errors || []) {
    const where = (error.loc || []).filter((part) => part !== "body").join(".");
    const line = where ? `${where}: ${error.msg}` : error.msg;
    if (!lines[0].includes(line)) lines.push(line);
  }
  return lines.join("\n");
}

async function problemOf(response) {
  try {
    return await response.json();
  } catch {
    return { title: response.statusText, detail: `HTTP ${response.status} ${response.statusText}` };
  }
}

let onUnauthorized = () => {};

/** What to do when the token is refused (401): log out and ask again. */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/** A fetch to the API; throws ApiError unless 2xx. */
export async function call(path, { method = "GET", json, text, headers = {}, signal, as } = {}) {
  const init = { method, signal, headers: { Authorization: `Bearer ${token()}`, ...headers } };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  } else if (text !== undefined) {
    init.body = text;
    init.headers["Content-Type"] = "text/plain; charset=utf-8";
  }
  const response = await fetch(apiBase() + path, init);
  if (response.status === 401) onUnauthorized();
  if (!response.ok) throw new ApiError(response.status, await problemOf(response));
  if (as === "response") return response;
  return response.status === 204 ? null : response.json();
}

/** A query string of the given values, leaving out empty ones ("?state=A&state=B&type=x"). */
export function query(values) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== null && item !== undefined && item !== "") params.append(key, item);
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}
