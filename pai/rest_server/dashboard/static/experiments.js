// The experiments the user may read, newest first: state, searcher and metric, trials by state, the best value.
import { get, query } from "./api.js";
import { badge, experimentLink, fmtTime, h, panel, show, table } from "./dom.js";
import { fmtNum } from "./plots.js";

export function mount(root, ctx) {
  const mine = ctx.query.get("username") === ctx.session.user;
  const toggle = h("button", { type: "button", id: "mine", onclick: () => {
    ctx.navigate(mine ? "#/experiments" : `#/experiments${query({ username: ctx.session.user })}`);
  } }, mine ? "All experiments" : "My experiments");
  const list = h("div");
  root.append(h("div.title-row", {}, h("h1", {}, "Experiments"), h("div.actions", {}, toggle)), panel(null, list));

  async function refresh() {
    const rows = await get(`/api/v2/experiments${query({ username: ctx.query.get("username") })}`);
    show(list, table(COLUMNS, [...rows].reverse(), {
      empty: "No experiment yet: POST one to /api/v2/experiments.", rowAttrs: (e) => ({ "data-key": e.key }) }));
  }
  return { title: "Experiments", refresh };
}

const direction = (sr) => (sr.smallerIsBetter === false ? "↑ larger is better" : "↓ smaller is better");

function counts(e) {
  const entries = Object.entries(e.trialCounts);
  const total = entries.reduce((a, [, n]) => a + n, 0);
  return [h("b", {}, `${total}`), h("span.muted", {}, ` of ${e.searcher.maxTrials}`),
    entries.length ? h("div.small.muted", {}, entries.map(([st, n]) => `${n} ${st.toLowerCase()}`).join(", ")) : null];
}

const COLUMNS = [
  { title: "Experiment", cell: (e) => experimentLink(e.key), class: "name" },
  { title: "Owner", cell: (e) => e.username },
  { title: "State", cell: (e) => badge(e.state) },
  { title: "Searcher", cell: (e) => [e.searcher.name, " on ", h("b", {}, e.searcher.metric),
    h("span.muted", { title: direction(e.searcher) }, ` ${direction(e.searcher)[0]}`)] },
  { title: "Trials", cell: counts, class: "trials" },
  { title: "Best", cell: (e) => (e.bestTrial ? [fmtNum(e.bestTrial.metric.value),
    h("span.muted", {}, ` trial ${e.bestTrial.number}`)] : "—"), class: "num" },
  { title: "VC", cell: (e) => e.virtualCluster },
  { title: "Created", cell: (e) => fmtTime(e.createdTime) },
  { title: "Ended", cell: (e) => fmtTime(e.completedTime) },
];
