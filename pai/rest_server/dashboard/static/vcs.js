// Virtual clusters: each one's guarantee, max, usage and borrowing; its usage over the last day (a chart of the
// samples the master keeps); its running jobs and its queue, with each waiting job's reason and position.
import { get, query } from "./api.js";
import { badge, fmtAgo, fmtMb, h, jobLink, panel, show, table } from "./dom.js";
import { usageChart } from "./chart.js";
import { shareBar, shareLegend } from "./cluster.js";

const HOURS = 24;
const HISTORY_EVERY = 30000; // the chart is read again at most this often (a sample is taken every minute)
const SHOWN = 50; // jobs of each list shown

export function mount(root, ctx) {
  const tabs = h("div.tabs");
  const head = h("div");
  const chart = h("div");
  const running = h("div");
  const waiting = h("div");
  const resource = h("div.segmented");
  root.append(h("h1", {}, "Virtual clusters"), tabs, head,
    panel(`Usage over the last ${HOURS} hours`, resource, chart), panel("Running jobs", running),
    panel("Waiting jobs, in queue order", waiting));
  let history = null, fetchedAt = 0, key = null, vc = null;

  async function refresh() {
    const vcs = Object.values(await get("/api/v2/virtual-clusters"));
    const name = ctx.params[0] || (vcs.find((v) => v.name === "default") || vcs[0] || {}).name;
    vc = vcs.find((v) => v.name === name);
    show(tabs, vcs.map((v) => h("a.tab", { href: `#/vcs/${encodeURIComponent(v.name)}`,
      class: v.name === name ? "active" : "", title: `${v.numRunningJobs} running, ${v.numPendingJobs} waiting` },
      v.name, h("span.muted", {}, ` ${v.numRunningJobs} running · ${v.numPendingJobs} waiting`))));
    if (!vc) {
      show(head, h("p.error", {}, `There is no virtual cluster ${name}.`));
      return;
    }
    key = key || (vc.resourcesCluster.gpu > 0 ? "gpu" : "cpu");
    const jobs = (state, order) => get(`/api/v2/jobs${query({ vc: vc.name, state, order, limit: SHOWN,
      withTotalCount: "true" })}`);  // the running ones; the waiting ones come in queue order from /queue
    const wantHistory = !history || Date.now() - fetchedAt > HISTORY_EVERY;
    const [run, wait, hist] = await Promise.all([jobs("RUNNING,STOPPING", "submissionTime,DESC"),
      get(`/api/v2/virtual-clusters/${encodeURIComponent(vc.name)}/queue?limit=${SHOWN}`),
      wantHistory ? get(`/api/v2/virtual-clusters/${encodeURIComponent(vc.name)}/usage-history?hours=${HOURS}`) : null]);
    if (hist) {
      history = hist;
      fetchedAt = Date.now();
    }
    show(head, summary(vc));
    drawChart();
    show(running, table(jobColumns(false), run.data, { empty: "No job of this VC runs." }), more(run));
    show(waiting, table(jobColumns(true), wait.jobs, { empty: "No job of this VC waits." }),
      more({ data: wait.jobs, totalCount: wait.total }));
  }

  function drawChart() {
    show(resource, ["gpu", "cpu", "memoryMB"].map((k) => h("button", { type: "button", class: k === key ? "on" : "",
      onclick: () => { key = k; drawChart(); } }, k === "memoryMB" ? "Memory" : k.toUpperCase())));
    show(chart, usageChart(history.samples, { key, hours: HOURS, sampleSeconds: history.sampleSeconds }));
  }

  return { title: "Virtual clusters", refresh };
}

function more(page) {
  return page.totalCount > page.data.length
    ? h("p.muted", {}, `${page.data.length} of ${page.totalCount.toLocaleString()} shown.`) : null;
}

function summary(vc) {
  const row = (title, r) => h("tr", {}, h("th", {}, title), h("td.num", {}, String(r.gpu)), h("td.num", {}, String(r.cpu)),
    h("td.num", {}, fmtMb(r.memoryMB)));
  return h("section.panel.vc-summary", { "data-vc": vc.name },
    h("h2", {}, vc.name, " ", badge(vc.status.toUpperCase())),
    h("div.vc-grid", {},
      h("table.amounts", {}, h("thead", {}, h("tr", {}, h("th"), h("th", {}, "GPU"), h("th", {}, "CPU"), h("th", {}, "Memory"))),
        h("tbody", {}, row("Guaranteed", vc.resourcesGuaranteed), row("Max", vc.resourcesMax),
          row("Used", vc.resourcesUsed), row("Borrowed", vc.resourcesBorrowed))),
      h("div", {}, h("div.muted", {}, "Share of the cluster (", vc.capacityBasis.toUpperCase(), ")"), shareBar(vc),
        shareLegend(),
        h("p", {}, `${vc.numRunningJobs} running, ${vc.numPendingJobs} waiting. Preemption: reclaim ` +
          `${vc.preemption.reclaim}, within the VC ${vc.preemption.withinVc}` +
          (vc.strictFifo ? "; strict FIFO." : ".")))));
}

function jobColumns(waiting) {
  const cols = [
    { title: "Job", cell: (j) => jobLink(`${j.username}~${j.name}`) },
    { title: "State", cell: (j) => badge(j.state) },
    { title: "Priority", cell: (j) => `${j.jobPriority} (${j.priority})` },
    { title: "GPUs", cell: (j) => String(j.totalGpuNumber), class: "num" },
    { title: "Tasks", cell: (j) => String(j.totalTaskNumber), class: "num" },
  ];
  if (!waiting) return [...cols, { title: "Running since", cell: (j) => fmtAgo(j.launchedTime) }];
  return [{ title: "#", cell: (j) => (j.waitingReason && j.waitingReason.position ? String(j.waitingReason.position)
    : "—"), class: "num" },
    ...cols, { title: "Waiting since", cell: (j) => fmtAgo(j.submissionTime) },
    { title: "Why it waits", cell: (j) => (j.waitingReason ? j.waitingReason.message : "not yet considered"),
      class: "reason" }];
}
