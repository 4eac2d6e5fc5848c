// #/login: the API token, checked with GET /whoami before it is kept.

import { apiBase } from "./api.js";
import { fill, h } from "./dom.js";
import * as notice from "./notice.js";
import { logIn } from "./session.js";

/** Ask the API who a token is; null if it is refused. */
export async function whoIs(value) {
  const response = await fetch(`${apiBase()}/whoami`, { headers: { Authorization: `Bearer ${value}` } });
  if (response.status === 401) return null;
  if (!response.ok) throw new Error(`the API answered ${response.status} ${response.statusText}`);
  return response.json();
}

/** Render the login form; onLogin() runs once a token was accepted and kept. */
export function loginPage(view, { onLogin, message = null }) {
  const area = notice.area();
  const input = h("input", {
    name: "token", type: "password", autocomplete: "off", required: true, size: 50,
    "aria-label": "API token",
  });
  const form = h("form", { class: "login" },
    h("label", null, "API token ", input), h("button", { type: "submit", text: "Log in" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const whoami = await whoIs(input.value.trim());
      if (!whoami) {
        notice.show(area, "The API refused this token (unknown, deleted or expired).");
        return;
      }
      logIn(input.value.trim(), whoami);
      onLogin();
    } catch (error) {
      notice.show(area, error.message);
    }
  });
  fill(view, h("h2", { text: "Log in" }),
    h("p", { class: "muted", text: "With an API token: `stellwerk up` prints the admin token "
      + "(also in .stellwerk/admin-token); `stellwerk token create` makes narrower ones." }),
    form, area);
  if (message) notice.show(area, message, "note");
  input.focus();
  return () => {};
}
