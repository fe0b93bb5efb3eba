// A VC's usage over time as an SVG drawn here: what its jobs used (an area), its guarantee and its max (lines).
import { fmtMb, fmtTime, h, s } from "./dom.js";

const W = 1000, H = 250, L = 56, R = 14, T = 14, B = 30;

/** samples: the usage-history API's, oldest first; key: gpu | cpu | memoryMB. */
export function usageChart(samples, { key, hours, sampleSeconds, now = Date.now() }) {
  if (!samples.length) {
    return h("p.muted.chart-empty", {}, `No samples yet: the master samples every VC's usage every ` +
      `${Math.round(sampleSeconds)} s and keeps three days.`);
  }
  // The last `hours`, or less when the samples began later (a new cluster): the chart spans what there is.
  const from = Math.max(now - hours * 3600e3, Math.min(samples[0].time, now - 10 * sampleSeconds * 1000));
  const value = (x, what) => x[what][key];
  const top = niceCeiling(Math.max(1, ...samples.flatMap((x) => [value(x, "used"), value(x, "guaranteed"),
    value(x, "max")])));
  const X = (t) => L + ((Math.max(t, from) - from) / (now - from)) * (W - L - R);
  const Y = (v) => H - B - (v / top) * (H - T - B);
  const label = (v) => (key === "memoryMB" ? fmtMb(v) : String(Math.round(v * 10) / 10));
  const gap = Math.max(3 * sampleSeconds * 1000, 5 * 60e3); // a longer silence (the master was down) breaks a line
  const parts = split(samples.filter((x) => x.time >= from), gap);

  const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const v = top * f;
    return s("g", { class: "grid" }, s("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v) }),
      s("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end" }, label(v)));
  });
  const step = tickStep(now - from);
  const ticks = [];
  for (let t = Math.ceil(from / step) * step; t <= now; t += step) {
    ticks.push(s("g", { class: "tick" }, s("line", { x1: X(t), x2: X(t), y1: H - B, y2: H - B + 4 }),
      s("text", { x: X(t), y: H - B + 17, "text-anchor": "middle" }, clock(t, step < 60e3))));
  }
  const area = parts.map((p) => s("path", { class: "used", d: areaPath(p, (x) => X(x.time), (x) => Y(value(x, "used")), Y(0)) }));
  const line = (what) => parts.map((p) => s("path", { class: what, d: stepPath(p, (x) => X(x.time), (x) => Y(value(x, what))) }));
  const last = samples[samples.length - 1];
  return h("figure.chart", {},
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `usage of ${key} over the last ${hours} hours` },
      ...grid, ...ticks, ...area, ...line("guaranteed"), ...line("max"),
      s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B })),
    h("figcaption.legend", {},
      h("span.legend-item", {}, h("span.swatch.used"), `used (now ${label(value(last, "used"))})`),
      h("span.legend-item", {}, h("span.swatch.guaranteed"), `guaranteed (${label(value(last, "guaranteed"))})`),
      h("span.legend-item", {}, h("span.swatch.max"), `max (${label(value(last, "max"))})`),
      h("span.muted", {}, `${samples.length} samples since ${fmtTime(samples[0].time)}, one every ` +
        `${Math.round(sampleSeconds)} s`)));
}

function split(samples, gap) {
  const parts = [];
  let part = [];
  for (const x of samples) {
    if (part.length && x.time - part[part.length - 1].time > gap) {
      parts.push(part);
      part = [];
    }
    part.push(x);
  }
  if (part.length) parts.push(part);
  return parts;
}

function stepPath(points, x, y) {
  let d = `M${x(points[0]).toFixed(1)},${y(points[0]).toFixed(1)}`;
  for (let i = 1; i < points.length; i++) d += `H${x(points[i]).toFixed(1)}V${y(points[i]).toFixed(1)}`;
  return points.length === 1 ? `${d}h2` : d;
}

function areaPath(points, x, y, base) {
  return `${stepPath(points, x, y)}V${base.toFixed(1)}H${x(points[0]).toFixed(1)}Z`;
}

const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200].map((x) => x * 1000);

/** The tick interval that puts at most 8 ticks on a span of ms. */
function tickStep(span) {
  return STEPS.find((x) => span / x <= 8) || STEPS[STEPS.length - 1];
}

function clock(t, seconds) {
  const d = new Date(t), two = (n) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}${seconds ? `:${two(d.getSeconds())}` : ""}`;
}

/** 1, 2, 5 x 10^n at or above v. */
export function niceCeiling(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
