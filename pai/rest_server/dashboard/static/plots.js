// An experiment's plots as SVG drawn here (the usage chart's frame and style, chart.js): learning curves (a metric
// against step, one line per trial) and a scatter (a hyperparameter against each trial's best value, one dot per
// trial). Colours are classes c0..c9 (the page's Content-Security-Policy forbids style attributes).
import { niceCeiling } from "./chart.js";
import { h, s } from "./dom.js";

const W = 1000, H = 300, L = 64, R = 16, T = 14, B = 40;
const INSET = 12; // px between the scatter's extreme dots and its frame
const MARKS = 1500; // points drawn as dots on the curves, at most (past it: lines only)

/** A number short: 4 significant digits, exponents for the very large and very small. */
export function fmtNum(v) {
  if (v === null || v === undefined || !Number.isFinite(Number(v))) return "—";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return Number(v).toExponential(2);
  return String(Number(Number(v).toPrecision(4)));
}

/** An axis from lo to hi onto pixels a..b: {at(v) -> px, ticks: [v...]}; `log`: powers of ten. */
function axis(lo, hi, a, b, log = false) {
  if (log) {
    let e0 = Math.floor(Math.log10(lo)), e1 = Math.ceil(Math.log10(hi));
    if (e0 === e1) { e0 -= 1; e1 += 1; }
    const ticks = [];
    for (let e = e0; e <= e1; e++) ticks.push(10 ** e);
    return { at: (v) => a + ((Math.log10(v) - e0) / (e1 - e0)) * (b - a), ticks };
  }
  if (lo === hi) { const pad = Math.abs(lo) / 10 || 1; lo -= pad; hi += pad; }
  const step = niceCeiling((hi - lo) / 5);
  const from = Math.floor(lo / step) * step, to = Math.ceil(hi / step) * step;
  const ticks = [];
  for (let v = from; v <= to + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { at: (v) => a + ((v - from) / (to - from)) * (b - a), ticks };
}

function frame(x, y, xTitle, yTitle) {
  return [
    ...y.ticks.map((v) => s("g", { class: "grid" }, s("line", { x1: L, x2: W - R, y1: y.at(v), y2: y.at(v) }),
      s("text", { x: L - 6, y: y.at(v) + 4, "text-anchor": "end" }, fmtNum(v)))),
    ...x.ticks.map((v) => s("g", { class: "tick" }, s("line", { x1: x.at(v), x2: x.at(v), y1: H - B, y2: H - B + 4 }),
      s("text", { x: x.at(v), y: H - B + 16, "text-anchor": "middle" }, fmtNum(v)))),
    s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }),
    s("text", { class: "axis-title", x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, xTitle),
    s("text", { class: "axis-title", x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
      transform: `rotate(-90 12 ${(T + H - B) / 2})` }, yTitle),
  ];
}

const extent = (values) => [Math.min(...values), Math.max(...values)];
const xy = (x, y) => `${x.toFixed(1)},${y.toFixed(1)}`;

/** series: [{number, label, points: [[step, value]...], best}]; one g.curve per series with points, the best drawn
 *  last (on top); hovering a line or its legend item names the trial. */
export function lineChart(series, { xTitle, yTitle, empty }) {
  const drawn = series.filter((c) => c.points.length);
  if (!drawn.length) return h("p.muted.chart-empty", {}, empty);
  const all = drawn.flatMap((c) => c.points);
  const [x0, x1] = extent(all.map((p) => p[0])), [y0, y1] = extent(all.map((p) => p[1]));
  const x = axis(x0, x1, L, W - R), y = axis(y0, y1, H - B, T);
  const marks = all.length <= MARKS;
  const groups = new Map();
  const ordered = [...drawn.filter((c) => !c.best), ...drawn.filter((c) => c.best)];
  for (const c of ordered) {
    const d = c.points.map((p, i) => `${i ? "L" : "M"}${xy(x.at(p[0]), y.at(p[1]))}`).join("");
    groups.set(c.number, s("g", { class: `curve c${c.number % 10}${c.best ? " best" : ""}`, "data-trial": c.number },
      s("title", {}, c.label), s("path", { d: c.points.length === 1 ? `${d}h2` : d }),
      marks ? c.points.map((p) => s("circle", { cx: x.at(p[0]).toFixed(1), cy: y.at(p[1]).toFixed(1), r: 2.5 },
        s("title", {}, `${c.label}: step ${p[0]}, ${fmtNum(p[1])}`))) : null));
  }
  const hl = (n, on) => groups.get(n).classList.toggle("hl", on);
  return h("figure.chart.curves", {},
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${yTitle} against ${xTitle}, one line a trial` },
      ...frame(x, y, xTitle, yTitle), ...groups.values()),
    h("figcaption.legend", {}, drawn.map((c) => h("span.legend-item", {
      "data-trial": c.number, class: c.best ? "best" : "", title: c.label,
      onmouseenter: () => hl(c.number, true), onmouseleave: () => hl(c.number, false),
    }, h(`span.swatch.line.c${c.number % 10}`), `trial ${c.number}${c.best ? " (best)" : ""}`))));
}

/** dots: [{number, label, x, y, best}]; `log`: a log x axis. */
export function scatterChart(dots, { xTitle, yTitle, log, empty }) {
  const drawn = dots.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y) && (!log || p.x > 0));
  if (!drawn.length) return h("p.muted.chart-empty", {}, empty);
  const [x0, x1] = extent(drawn.map((p) => p.x)), [y0, y1] = extent(drawn.map((p) => p.y));
  const x = axis(x0, x1, L + INSET, W - R - INSET, log), y = axis(y0, y1, H - B - INSET, T); // no dot on an edge
  return h("figure.chart.scatter", {},
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${yTitle} against ${xTitle}, one dot a trial` },
      ...frame(x, y, xTitle, yTitle),
      ...drawn.map((p) => s("circle", { class: `dot c${p.number % 10}${p.best ? " best" : ""}`, "data-trial": p.number,
        cx: x.at(p.x).toFixed(1), cy: y.at(p.y).toFixed(1), r: p.best ? 7 : 5 }, s("title", {}, p.label)))));
}
