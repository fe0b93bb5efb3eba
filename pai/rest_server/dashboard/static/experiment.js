// One experiment: its facts and Stop; every trial's learning curve (the searcher's metric against step, one line a
// trial, the best one highlighted); a hyperparameter against each trial's best value; its trials, sortable by any
// column. Read again every 2 s while it is ACTIVE or STOPPING; a trial's curve only when it has new points.
import { experimentPath, get, put } from "./api.js";
import { badge, fmtTime, h, jobLink, panel, show, table } from "./dom.js";
import { fmtNum, lineChart, scatterChart } from "./plots.js";

const LIVE = ["ACTIVE", "STOPPING"];
const NUMERIC = ["int", "double", "log"]; // the hyperparameter types the scatter can put on its x axis

export function mount(root, ctx) {
  const key = ctx.params[0];
  const title = h("h1", {}, key), actions = h("div.actions"), info = h("div");
  const curves = h("div", { id: "curves" }), scatter = h("div", { id: "scatter" }), trials = h("div", { id: "trials" });
  const pick = h("select", { name: "hparam", onchange: () => drawScatter() });
  root.append(h("div.title-row", {}, title, actions), info, panel("Learning curves", curves),
    panel("Hyperparameter against the metric", h("label.pick", {}, "Hyperparameter ", pick), scatter),
    panel("Trials", trials));
  let d = null, sort = null;
  const series = new Map(); // trial id -> {stamp, points}: read again when the trial's points or state change
  const stamp = (t) => `${t.points}:${t.state}`;

  async function refresh() {
    if (d && !LIVE.includes(d.state) && d.trials.every((t) => series.get(t.id)?.stamp === stamp(t))) return;
    const got = await get(experimentPath(key));
    const metric = got.searcher.metric;
    await Promise.all(got.trials.filter((t) => series.get(t.id)?.stamp !== stamp(t)).map(async (t) => {
      const m = await get(`/api/v2/trials/${t.id}/metrics?name=${encodeURIComponent(metric)}`);
      series.set(t.id, { stamp: stamp(t), points: m.metrics[metric] || [] });
    }));
    if (!d) fillPick(got);
    d = got;
    sort = sort || { by: "best", dir: smaller() ? 1 : -1 };
    draw();
  }

  const smaller = () => d.searcher.smallerIsBetter !== false;
  const bestId = () => (d.bestTrial ? d.bestTrial.id : null);
  const mayStop = () => d.state === "ACTIVE" && (ctx.session.admin || ctx.session.user === d.username);

  function draw() {
    show(title, key, " ", badge(d.state));
    show(actions, mayStop() ? h("button.danger", { type: "button", id: "stop", onclick: stop }, "Stop") : null);
    show(info, panel(null, facts(d)));
    const label = (t) => `trial ${t.number} (${hparamText(t.hparams)})`;
    show(curves, lineChart(d.trials.map((t) => ({ number: t.number, label: label(t), best: t.id === bestId(),
      points: series.get(t.id)?.points || [] })), { xTitle: "step", yTitle: d.searcher.metric,
      empty: `No trial has reported ${d.searcher.metric} yet.` }));
    drawScatter();
    drawTrials();
  }

  function fillPick(got) {
    const names = Object.entries(got.hyperparameters).filter(([, v]) => NUMERIC.includes(v.type)).map(([n]) => n);
    show(pick, names.map((n) => h("option", { value: n }, `${n} (${got.hyperparameters[n].type})`)));
    pick.disabled = !names.length;
  }

  function drawScatter() {
    if (!d) return;
    const name = pick.value;
    if (!name) {
      show(scatter, h("p.muted.chart-empty", {}, "No numeric hyperparameter (int, double or log) to plot."));
      return;
    }
    const metric = d.searcher.metric;
    show(scatter, scatterChart(d.trials.filter((t) => t.best).map((t) => ({ number: t.number,
      x: Number(t.hparams[name]), y: t.best.value, best: t.id === bestId(),
      label: `trial ${t.number}: ${name} ${fmtNum(t.hparams[name])}, best ${metric} ${fmtNum(t.best.value)}` })),
    { xTitle: name, yTitle: `best ${metric}`, log: d.hyperparameters[name].type === "log",
      empty: `No trial has reported ${metric} yet.` }));
  }

  function drawTrials() {
    const names = Object.keys(d.hyperparameters);
    const cols = [
      { by: "number", title: "#", value: (t) => t.number, class: "num",
        cell: (t) => [String(t.number),
          t.id === bestId() ? h("span.tag.best-mark", { title: "the best trial" }, "best") : null] },
      { title: "Job", cell: (t) => (t.jobName ? jobLink(t.jobName) : "—"), class: "name" },
      { by: "state", title: "State", value: (t) => t.state, cell: (t) => [badge(t.state),
        t.stoppedBy ? h("span.muted.stopped-by", {}, ` stopped by ${t.stoppedBy}`) : null] },
      ...names.map((n) => ({ by: `hp:${n}`, title: n, value: (t) => t.hparams[n], class: "num",
        cell: (t) => (typeof t.hparams[n] === "number" ? fmtNum(t.hparams[n]) : String(t.hparams[n])) })),
      { by: "latest", title: "Latest", value: (t) => t.latest?.value, class: "num", cell: (t) => point(t.latest) },
      { by: "best", title: `Best ${d.searcher.metric}`, value: (t) => t.best?.value, class: "num",
        cell: (t) => point(t.best) },
      { by: "points", title: "Points", value: (t) => t.points, class: "num", cell: (t) => String(t.points) },
    ];
    const col = cols.find((c) => c.by === sort.by) || cols[0];
    const rows = [...d.trials].sort((a, b) => compare(col.value(a), col.value(b), sort.dir) || a.number - b.number);
    show(trials, table(cols.map((c) => ({ ...c, title: c.by ? sortButton(c) : c.title })), rows, {
      empty: "No trial yet.",
      rowAttrs: (t) => ({ "data-trial": t.number, class: t.id === bestId() ? "best" : "" }) }));
  }

  function sortButton(c) {
    const on = sort.by === c.by;
    return h("button.sort", { type: "button", "data-sort": c.by, class: on ? "on" : "", "aria-sort": on
      ? (sort.dir > 0 ? "ascending" : "descending") : null, onclick: () => {
      sort = on ? { by: c.by, dir: -sort.dir } : { by: c.by, dir: c.by === "best" && !smaller() ? -1 : 1 };
      drawTrials();
    } }, c.title, on ? (sort.dir > 0 ? " ▲" : " ▼") : "");
  }

  async function stop() {
    if (!window.confirm(`Stop experiment ${key}? Its running trials are stopped and no new one starts.`)) return;
    try {
      await put(`${experimentPath(key)}/executionType`, { value: "STOP" });
      ctx.report(null);
    } catch (e) {
      ctx.report(e);
    }
    await refresh().catch(ctx.report);
  }

  return { title: key, refresh, interval: 2000 };
}

/** a before b in direction dir (1 ascending, -1 descending); a missing value last either way. */
function compare(a, b, dir) {
  const none = (v) => v === null || v === undefined;
  if (none(a) || none(b)) return none(a) - none(b);
  if (typeof a === "number" && typeof b === "number") return dir * (a - b);
  return dir * String(a).localeCompare(String(b));
}

const point = (p) => (p ? h("span", { title: `at step ${p.step}` }, fmtNum(p.value), h("span.muted", {}, ` @${p.step}`))
  : "—");
const hparamText = (hp) => Object.entries(hp).map(([k, v]) => `${k}=${typeof v === "number" ? fmtNum(v) : v}`)
  .join(", ");

function facts(d) {
  const sr = d.searcher, counts = Object.entries(d.trialCounts);
  const best = d.bestTrial;
  const rows = [
    ["Owner", d.username], ["Virtual cluster", d.virtualCluster],
    ["Searcher", `${sr.name}, at most ${sr.maxTrials} trials, ${sr.maxConcurrentTrials || 1} at a time`],
    ["Metric", `${sr.metric}, ${sr.smallerIsBetter === false ? "larger" : "smaller"} is better`],
    ["Created", fmtTime(d.createdTime)], ["Ended", fmtTime(d.completedTime)],
    ["Trials", counts.length ? counts.map(([st, n]) => `${n} ${st.toLowerCase()}`).join(", ") : "none yet"],
    ["Best", best ? [`trial ${best.number}: ${fmtNum(best.metric.value)} at step ${best.metric.step} `,
      best.jobName ? jobLink(best.jobName) : null] : "—"],
  ];
  if (d.stopRequested && d.state !== "STOPPED") rows.push(["Stop", "asked; its trials are being stopped"]);
  if (d.description) rows.push(["Description", d.description]);
  return h("dl.facts", {}, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}
