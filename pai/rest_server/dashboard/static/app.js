// The dashboard: a single page with routes in the URL's fragment (#/cluster, #/nodes, #/vcs/NAME, #/jobs,
// #/jobs/USER~NAME, #/submit, #/experiments, #/experiments/USER~NAME, #/login). Each page module exports mount(root, ctx) ->
// {refresh, interval, unmount}; the app calls refresh at once and then every `interval` ms while the page is shown
// and the tab visible, so pages follow the cluster without a reload.
import { ApiError, get, onUnauthorized, request, session } from "./api.js";
import { h, show } from "./dom.js";

const PAGES = [
  [/^cluster$/, "cluster"],
  [/^nodes$/, "nodes"],
  [/^vcs(?:\/(.+))?$/, "vcs"],
  [/^jobs$/, "jobs"],
  [/^jobs\/(.+)$/, "job"],
  [/^submit$/, "submit"],
  [/^experiments$/, "experiments"],
  [/^experiments\/(.+)$/, "experiment"],
  [/^login$/, "login"],
  [/^admin(?:\/(users|groups|vcs|storages|tokens))?$/, "admin"], // admins only (admin.js)
];
const DEFAULT_INTERVAL = 3000;

const root = document.getElementById("page");
const problem = document.getElementById("problem");
let current = null; // {page, timer, generation}
let generation = 0;

function parse(hash) {
  const [path, q] = hash.replace(/^#\/?/, "").split("?");
  for (const [re, name] of PAGES) {
    const m = re.exec(path || "cluster");
    if (m) return { name, params: m.slice(1).map((x) => (x === undefined ? x : decodeURIComponent(x))),
                    query: new URLSearchParams(q || "") };
  }
  return { name: "cluster", params: [], query: new URLSearchParams() };
}

export function navigate(hash, { replace = false } = {}) {
  if (replace) {
    history.replaceState(null, "", hash);
    route();
  } else {
    location.hash = hash;
  }
}

function stop() {
  if (!current) return;
  clearTimeout(current.timer);
  if (current.page && current.page.unmount) current.page.unmount();
  current = null;
}

export function report(error) {
  if (!error) {
    problem.hidden = true;
    return;
  }
  const text = error instanceof ApiError ? `${error.code || error.status}: ${error.message}`
    : `The master did not answer (${error.message || error}). Retrying…`;
  show(problem, text);
  problem.hidden = false;
}

async function route() {
  stop();
  const where = parse(location.hash);
  const s = session.get();
  if (where.name !== "login" && !(s && s.token)) {
    navigate(`#/login?next=${encodeURIComponent(location.hash || "#/cluster")}`, { replace: true });
    return;
  }
  header(where.name === "login" ? null : s, where.name);
  const mine = ++generation;
  let module;
  try {
    module = await import(`./${where.name}.js`);
  } catch (e) {
    report(e);
    return;
  }
  if (mine !== generation) return;
  report(null);
  root.replaceChildren();
  const ctx = {
    params: where.params, query: where.query, session: s, navigate, report,
    remember: (hash) => history.replaceState(null, "", hash), // a page's own state (filters) in the URL
  };
  const page = module.mount(root, ctx);
  current = { page, timer: 0 };
  document.title = `${page.title || "pai"} · pai`;
  if (page.refresh) await tick(mine, page);
}

async function tick(mine, page) {
  if (mine !== generation) return;
  if (!document.hidden) {
    try {
      await page.refresh();
      if (mine !== generation) return;
      report(null);
      show(document.getElementById("updated"), `updated ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      if (mine !== generation) return;
      report(e);
    }
  }
  if (current && mine === generation) current.timer = setTimeout(() => tick(mine, page), page.interval || DEFAULT_INTERVAL);
}

function header(s, name) {
  const top = document.getElementById("top");
  top.hidden = !s;
  document.body.classList.toggle("admin", Boolean(s && s.admin));
  if (!s) return;
  const section = { job: "jobs", experiment: "experiments" }[name] || name;
  for (const a of top.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === section);
  show(document.getElementById("who"), s.user, s.admin ? h("span.tag", {}, "admin") : null);
}

/** Who the stored token speaks for now (the users API's admin flag; signs out if the master refuses the token);
 *  true when the flag changed (the page is shown again, with or without its admin actions). */
async function checkSession() {
  const s = session.get();
  if (!s || !s.token) return false;
  try {
    const me = await get(`/api/v2/users/${encodeURIComponent(s.user)}`);
    session.set({ ...s, admin: Boolean(me.admin) });
    return Boolean(me.admin) !== Boolean(s.admin);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 401) report(e);
    return false;
  }
}

function signOut() {
  session.clear();
  stop();
  navigate(`#/login?next=${encodeURIComponent(location.hash)}`);
}

onUnauthorized(() => {
  if (!location.hash.startsWith("#/login")) signOut();
});
document.getElementById("logout").addEventListener("click", async () => {
  try { await request("DELETE", "/api/v2/proxy/session"); } catch { /* the proxy's cookie dies with the token anyway */ }
  try { await request("DELETE", "/api/v2/authn/basic/logout"); } catch { /* the token is dropped either way */ }
  session.clear();
  stop();
  navigate("#/login");
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && current && current.page.refresh) {
    clearTimeout(current.timer);
    tick(generation, current.page);
  }
});
window.addEventListener("hashchange", route);
route();
checkSession().then((changed) => changed && route());
