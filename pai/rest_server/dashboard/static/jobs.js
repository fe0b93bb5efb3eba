// The job list: filtered (user, VC, state, keyword) and paged by the API (limit, offset, order; withTotalCount),
// so that it costs the same with a hundred jobs stored or a hundred thousand.
import { get, query } from "./api.js";
import { badge, fmtDuration, fmtTime, h, jobLink, panel, show, table } from "./dom.js";

const STATES = ["WAITING", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED"];
const SIZES = [20, 50, 100];

export function mount(root, ctx) {
  const q = ctx.query;
  const f = {
    username: q.get("username") || "", vc: q.get("vc") || "", state: q.get("state") || "",
    keyword: q.get("keyword") || "", offset: Number(q.get("offset")) || 0,
    limit: SIZES.includes(Number(q.get("limit"))) ? Number(q.get("limit")) : SIZES[0],
  };
  const user = h("input", { name: "username", placeholder: "any user", value: f.username, size: 12 });
  const keyword = h("input", { name: "keyword", type: "search", placeholder: "name contains", value: f.keyword, size: 16 });
  const vc = h("select", { name: "vc", onchange: apply }, h("option", { value: "" }, "any VC"));
  const state = h("select", { name: "state", onchange: apply }, h("option", { value: "" }, "any state"),
    STATES.map((s) => h("option", { value: s, selected: s === f.state }, s.toLowerCase())));
  const size = h("select", { name: "limit", onchange: apply },
    SIZES.map((n) => h("option", { value: n, selected: n === f.limit }, `${n} a page`)));
  const mine = h("button", { type: "button", onclick: () => { user.value = ctx.session.user; apply(); } }, "My jobs");
  const form = h("form.filters", { onsubmit: (e) => { e.preventDefault(); apply(); } },
    h("label", {}, "User ", user), h("label", {}, "VC ", vc), h("label", {}, "State ", state),
    h("label", {}, "Keyword ", keyword), h("button.primary", { type: "submit" }, "Filter"), mine, size);
  const list = h("div");
  const pager = h("div.pager");
  root.append(h("div.title-row", {}, h("h1", {}, "Jobs"),
    h("div.actions", {}, h("a.button.primary", { href: "#/submit", id: "new-job" }, "Submit a job"))),
  form, panel(null, list, pager));
  let vcsLoaded = false;

  function apply() {
    Object.assign(f, { username: user.value.trim(), vc: vc.value, state: state.value, keyword: keyword.value.trim(),
      limit: Number(size.value), offset: 0 });
    go();
  }

  function go() {
    ctx.remember(`#/jobs${query({ ...f, offset: f.offset || "", limit: f.limit === SIZES[0] ? "" : f.limit })}`);
    refresh().catch(ctx.report);
  }

  async function loadVcs() {
    if (vcsLoaded) return;
    const names = Object.keys(await get("/api/v2/virtual-clusters")).sort();
    vc.append(...names.map((n) => h("option", { value: n, selected: n === f.vc }, n)));
    vcsLoaded = true;
  }

  async function refresh() {
    const asked = { ...f };
    const [page] = await Promise.all([
      get(`/api/v2/jobs${query({ username: f.username, vc: f.vc, state: f.state, keyword: f.keyword,
        offset: f.offset, limit: f.limit, order: "submissionTime,DESC", withTotalCount: "true" })}`),
      loadVcs()]);
    if (JSON.stringify(asked) !== JSON.stringify(f)) return; // the filters changed meanwhile: that answer follows
    show(list, table(COLUMNS, page.data, { empty: "No job matches.", rowAttrs: (j) => ({ "data-key": `${j.username}~${j.name}` }) }));
    const last = Math.min(f.offset + page.data.length, page.totalCount);
    show(pager,
      h("button", { type: "button", disabled: f.offset === 0, onclick: () => { f.offset = Math.max(0, f.offset - f.limit); go(); } }, "‹ Newer"),
      h("span.muted", { "data-total": page.totalCount }, page.totalCount
        ? `${(f.offset + 1).toLocaleString()}–${last.toLocaleString()} of ${page.totalCount.toLocaleString()}` : "0 jobs"),
      h("button", { type: "button", disabled: last >= page.totalCount, onclick: () => { f.offset += f.limit; go(); } }, "Older ›"));
  }

  return { title: "Jobs", refresh };
}

const COLUMNS = [
  { title: "Job", cell: (j) => jobLink(`${j.username}~${j.name}`), class: "name" },
  { title: "User", cell: (j) => j.username },
  { title: "VC", cell: (j) => j.virtualCluster },
  { title: "State", cell: (j) => badge(j.state) },
  { title: "GPUs", cell: (j) => String(j.totalGpuNumber), class: "num" },
  { title: "Tasks", cell: (j) => String(j.totalTaskNumber), class: "num" },
  { title: "Retries", cell: (j) => String(j.retries), class: "num" },
  { title: "Submitted", cell: (j) => fmtTime(j.submissionTime) },
  { title: "Duration", cell: (j) => (j.launchedTime ? fmtDuration((j.completedTime || Date.now()) - j.launchedTime) : "—") },
  { title: "Exit code", cell: (j) => (j.appExitCode === null ? "—" : String(j.appExitCode)), class: "num" },
];
