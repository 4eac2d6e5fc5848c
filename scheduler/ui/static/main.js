// Where the page starts: hash routes (#/jobs, #/jobs/<id>, #/runs, #/runs/<id>,
// #/workers, #/submit, #/login), each a view that renders into <main> and returns what stops it (a live
// stream, a followed log) when another view takes its place.

import { whenUnauthorized } from "./api.js";
import { fill, h } from "./dom.js";
import { jobPage } from "./job_page.js";
import { jobsPage } from "./jobs_page.js";
import { loginPage, whoIs } from "./login_page.js";
import { runPage } from "./run_page.js";
import { runsPage } from "./runs_page.js";
import { logOut, setWho, token, who } from "./session.js";
import { submitPage } from "./submit_page.js";
import { workersPage } from "./workers_page.js";

const ROUTES = [
  [/^#\/jobs\/([^/]+)$/, (view, id) => jobPage(view, decodeURIComponent(id))],
  [/^#\/runs\/([^/]+)$/, (view, id) => runPage(view, decodeURIComponent(id))],
  [/^#\/submit$/, (view) => submitPage(view)],
  [/^#\/jobs$/, (view) => jobsPage(view)],
  [/^#\/runs$/, (view) => runsPage(view)],
  [/^#\/workers$/, (view) => workersPage(view)],
];

let stopView = () => {};

/** Render the view the hash names; without a usable token, the login form. */
async function route() {
  stopView();
  stopView = () => {};
  const view = document.getElementById("view");
  const hash = window.location.hash || "#/jobs";
  const onLogin = () => navigate(hash === "#/login" ? "#/jobs" : hash);
  if (!token() || hash === "#/login") {
    stopView = loginPage(view, { onLogin });
    showWho();
    return;
  }
  if (!who()) {
    const whoami = await whoIs(token()).catch(() => null);
    if (!whoami) {
      logOut();
      stopView = loginPage(view, { onLogin, message: "Please log in again." });
      return;
    }
    setWho(whoami);
  }
  showWho();
  const found = ROUTES.map(([pattern, render]) => [hash.match(pattern), render]).find(([match]) => match);
  if (!found) {
    window.location.hash = "#/jobs";
    return;
  }
  const [match, render] = found;
  stopView = render(view, ...match.slice(1));
}

/** Go to a hash route; render it again if it is the current one. */
function navigate(hash) {
  if (window.location.hash === hash) route();
  else window.location.hash = hash;
}

/** The header: who is logged in, with which rights, and a way out. */
function showWho() {
  const area = document.getElementById("who");
  const whoami = who();
  if (!whoami) {
    fill(area);
    return;
  }
  const out = h("button", { type: "button", class: "link", text: "Log out" });
  out.addEventListener("click", () => {
    logOut();
    navigate("#/login");
  });
  const tenant = whoami.tenant ? `, tenant ${whoami.tenant}` : "";
  fill(area, `${whoami.name} (${whoami.scopes.join(", ")}${tenant}) `, out);
}

whenUnauthorized(() => {
  logOut();
  navigate("#/login");
});
window.addEventListener("hashchange", route);
route();
