// The logged-in token and what it may do. The token is kept in sessionStorage: it
// lives as long as the browser tab and is not sent anywhere but to this API.

const KEY = "stellwerk.token";
let identity = null; // GET /whoami of the current token

export function token() {
  return sessionStorage.getItem(KEY);
}

/** Remember a token that /whoami accepted, with what it may do. */
export function logIn(value, whoami) {
  sessionStorage.setItem(KEY, value);
  identity = whoami;
}

export function logOut() {
  sessionStorage.removeItem(KEY);
  identity = null;
}

export function who() {
  return identity;
}

export function setWho(whoami) {
  identity = whoami;
}

/** Whether the token has a right ("job", "job.read", "job.task"; "job" implies all). */
export function may(right) {
  return Boolean(identity && identity.rights.includes(right));
}

/** Changing jobs and runs (run now, cancel, retry, skip, submit...) needs "job". */
export function mayChange() {
  return may("job");
}

/** Confirming or rejecting a task needs "job.task" (or "job"). */
export function mayDecide() {
  return may("job.task");
}
