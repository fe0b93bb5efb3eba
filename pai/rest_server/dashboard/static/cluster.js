// The cluster at a glance: nodes by state, resources used and free, a map of the nodes with their GPUs, jobs by
// state, and every VC's guaranteed, used and borrowed share.
import { get } from "./api.js";
import { badge, bar, fmtMb, h, lower, panel, show, table } from "./dom.js";

const NODE_STATES = ["READY", "LOST", "CORDONED", "DRAINING"];
const JOB_STATES = ["WAITING", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED"];

export function mount(root) {
  const cards = h("div.cards");
  const map = h("div.node-map");
  const vcs = h("div");
  root.append(h("h1", {}, "Cluster"), cards,
    panel("Nodes and their GPUs", legend(), map), panel("Virtual clusters", vcs, shareLegend()));

  async function refresh() {
    const [nodes, vcMap, counts] = await Promise.all([
      get("/api/v2/nodes"), get("/api/v2/virtual-clusters"), get("/api/v2/cluster/job-counts")]);
    show(cards, nodeCard(nodes), ...resourceCards(nodes), jobCard(counts));
    show(map, nodes.length ? nodes.map(tile) : h("p.muted", {}, "No node has registered yet."));
    show(vcs, vcTable(Object.values(vcMap)));
  }
  return { title: "Cluster", refresh };
}

function nodeCard(nodes) {
  const by = Object.fromEntries(NODE_STATES.map((st) => [st, 0]));
  for (const n of nodes) by[n.state] = (by[n.state] || 0) + 1;
  const unhealthy = nodes.filter((n) => !n.healthy).length;
  return h("div.card", { id: "card-nodes" }, h("h3", {}, "Nodes"), h("div.big", {}, String(nodes.length)),
    h("div.chips", {}, NODE_STATES.map((st) => chip(st, by[st])), chip("UNHEALTHY", unhealthy)));
}

const chip = (state, n, href) => h(href ? "a.chip" : "span.chip", { class: n ? `st-${lower(state)}` : "zero", href,
  "data-state": state }, h("b", {}, String(n)), " ", lower(state));

function resourceCards(nodes) {
  const live = nodes.filter((n) => n.state !== "LOST");
  const sum = (f) => live.reduce((a, n) => a + f(n), 0);
  const cards = [["GPUs", "gpu", ""], ["CPUs", "cpu", ""], ["Memory", "memoryMB", "MB"]];
  return cards.map(([title, key, unit]) => {
    const total = sum((n) => n.total[key] - (key === "gpu" ? n.failedGpus.length : 0));
    const used = sum((n) => n.used[key]);
    const free = Math.max(0, total - used);
    return h("div.card", {}, h("h3", {}, title),
      h("div.big", {}, unit === "MB" ? fmtMb(free) : String(free), h("small", {}, " free")),
      bar(used, total, unit));
  });
}

function jobCard(counts) {
  return h("div.card.wide", { id: "card-jobs" }, h("h3", {}, "Jobs"), h("div.big", {}, counts.total.toLocaleString()),
    h("div.chips", {}, JOB_STATES.map((st) => chip(st, counts.byState[st] || 0, `#/jobs?state=${st}`))));
}

function legend() {
  const cell = (cls, text) => h("span.legend-item", {}, h(`span.gpu.${cls}`), text);
  return h("div.legend", {}, cell("free", "free GPU"), cell("used", "allocated"), cell("failed", "failed"),
    cell("off", "on a lost node"));
}

/** The node's tasks, another user's included (where jobs are private, the master only counts those). */
const taskCount = (n) => n.tasks.length + (n.otherUsersTasks || 0);

function tile(n) {
  const owner = {};
  for (const t of n.tasks) for (const g of t.gpus) owner[g] = `${t.job} ${t.role}[${t.taskIndex}]`;
  const lost = n.state === "LOST";
  const gpus = [];
  for (let i = 0; i < n.total.gpu; i++) {
    const failed = n.failedGpus.includes(i);
    const cls = lost ? "off" : failed ? "failed" : n.usedGpus.includes(i) ? "used" : "free";
    const who = owner[i] || (n.usedGpus.includes(i) ? "another user's task" : lost ? "lost" : "free");
    gpus.push(h(`span.gpu.${cls}`, { title: `GPU ${i}: ${failed ? "failed" : who}` }));
  }
  return h("div.node-tile", { class: `tile-${lower(n.state)}${n.healthy ? "" : " unhealthy"}`, "data-node": n.name },
    h("div.node-head", {}, h("a.node-name", { href: "#/nodes" }, n.name), badge(n.state)),
    h("div.gpus", {}, gpus.length ? gpus : h("span.muted", {}, "no GPUs")),
    h("div.node-meta", {}, `${n.used.cpu}/${n.total.cpu} CPU · ${fmtMb(n.used.memoryMB)}/${fmtMb(n.total.memoryMB)}`),
    h("div.node-meta", {}, taskCount(n) ? `${taskCount(n)} task${taskCount(n) > 1 ? "s" : ""}` : "idle",
      n.healthy ? null : h("span.warn", { title: n.problems.join("; ") }, " · unhealthy")));
}

/** Every VC's share of the basis resource (GPU on a GPU cluster, else CPU). */
export function vcTable(vcs) {
  const unit = (vc) => (vc.capacityBasis === "gpu" ? "gpu" : "cpu");
  const amount = (r, vc) => `${r[unit(vc)]} ${unit(vc).toUpperCase()}`;
  return table([
    { title: "VC", cell: (vc) => h("a", { href: `#/vcs/${encodeURIComponent(vc.name)}` }, vc.name) },
    { title: "Status", cell: (vc) => badge(vc.status.toUpperCase()) },
    { title: "Guaranteed", cell: (vc) => `${amount(vc.resourcesGuaranteed, vc)} (${vc.capacity}%)`, class: "num" },
    { title: "Used", cell: (vc) => `${amount(vc.resourcesUsed, vc)} (${vc.usedCapacity}%)`, class: "num" },
    { title: "Borrowed", cell: (vc) => amount(vc.resourcesBorrowed, vc), class: "num" },
    { title: "Max", cell: (vc) => `${amount(vc.resourcesMax, vc)} (${vc.maxCapacity}%)`, class: "num" },
    { title: "Share of the cluster", cell: shareBar, class: "share-cell" },
    { title: "Jobs", cell: (vc) => `${vc.numRunningJobs} running, ${vc.numPendingJobs} waiting` },
  ], vcs, { rowAttrs: (vc) => ({ "data-vc": vc.name }) });
}

/** What the marks of a share bar mean. */
export function shareLegend() {
  const item = (cls, text) => h("span.legend-item", {}, h(`span.swatch.${cls}`), text);
  return h("div.share-legend", {}, item("own", "used within the guarantee"), item("borrowed", "borrowed"),
    item("mark.guarantee", "guarantee"), item("mark.max", "max"));
}

/** The cluster as a track: what the VC uses within its guarantee, what it borrows, and marks at its guarantee and
 *  its max. */
export function shareBar(vc) {
  const key = vc.capacityBasis === "gpu" ? "gpu" : "cpu";
  const total = vc.resourcesCluster[key] || 0;
  const pct = (x) => (total ? Math.min(100, (100 * x) / total) : 0);
  const used = vc.resourcesUsed[key], borrowed = vc.resourcesBorrowed[key];
  return h("div.share", { title: `guaranteed ${vc.resourcesGuaranteed[key]}, used ${used}, borrowed ${borrowed}, ` +
      `max ${vc.resourcesMax[key]} of ${total} ${key.toUpperCase()}` },
    h("div.share-own", { "width%": pct(used - borrowed).toFixed(1) }),
    h("div.share-borrowed", { "width%": pct(borrowed).toFixed(1) }),
    h("div.share-mark.guarantee", { "left%": pct(vc.resourcesGuaranteed[key]).toFixed(1) }),
    h("div.share-mark.max", { "left%": pct(vc.resourcesMax[key]).toFixed(1) }));
}
