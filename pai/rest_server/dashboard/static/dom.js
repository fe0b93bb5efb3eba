// Building the page: elements from data with text nodes only (never HTML from the API), and the small pieces
// every page shows (state badges, usage bars, tables, times).

/** An element: h("a.link", {href, onclick}, "text", child, [children]). Attributes go through setAttribute;
 *  `on*` functions become listeners; `text` sets the text; "width%": 40 sets a style in percent; null children are
 *  skipped. */
export function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  apply(el, attrs);
  el.append(...flat(children));
  return el;
}

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element, attributes as h's. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  apply(el, attrs);
  el.append(...flat(children));
  return el;
}

function apply(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = String(v);
    else if (k === "class") el.classList.add(...String(v).split(" ").filter(Boolean));
    else if (k.endsWith("%")) el.style[k.slice(0, -1)] = `${v}%`; // "width%": 40 (CSSOM, which the page's
    // Content-Security-Policy allows where it forbids style attributes)
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function flat(children) {
  const out = [];
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    out.push(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return out;
}

export const lower = (x) => String(x || "").toLowerCase();

/** A job or node state as a coloured badge. */
export const badge = (state, extra = "") =>
  h(`span.badge.st-${lower(state)}`, { class: extra, "data-state": state }, state || "—");

/** used / total as a bar with its figures. */
export function bar(used, total, label = "") {
  const pct = total > 0 ? Math.min(100, (100 * used) / total) : 0;
  return h("div.meter", { title: `${label} ${used} of ${total} used` },
    h("div.meter-track", {}, h("div.meter-fill", { "width%": pct.toFixed(1) })),
    h("span.meter-text", {}, `${fmtAmount(used, label)} / ${fmtAmount(total, label)}`));
}

export function fmtAmount(n, unit) {
  if (unit === "MB") return fmtMb(n);
  return `${n}${unit ? " " + unit : ""}`;
}

export function fmtMb(mb) {
  if (mb >= 1024 * 1024) return `${(mb / 1024 / 1024).toFixed(1)} TB`;
  if (mb >= 1024) return `${(mb / 1024).toFixed(mb >= 10240 ? 0 : 1)} GB`;
  return `${mb} MB`;
}

/** A time in ms as the local date and time (today: only the time). */
export function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export const fmtAgo = (ms) => (ms ? `${fmtDuration(Date.now() - ms)} ago` : "never");

/** A table: columns [{title, cell(row) -> node|text, class}], one row each; `empty` when there is none. */
export function table(columns, rows, { empty = "Nothing here.", rowAttrs } = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class }, c.title))));
  const body = h("tbody", {}, rows.length ? rows.map((r) =>
    h("tr", rowAttrs ? rowAttrs(r) : {}, columns.map((c) => h("td", { class: c.class }, c.cell(r)))))
    : h("tr", {}, h("td.empty", { colspan: columns.length }, empty)));
  return h("div.table-wrap", {}, h("table", {}, head, body));
}

/** A panel with a title, and the elements it holds. */
export const panel = (title, ...children) => h("section.panel", {}, title ? h("h2", {}, title) : null, ...children);

export const jobLink = (key) => h("a", { href: `#/jobs/${encodeURIComponent(key)}` }, key);

export const experimentLink = (key, text = key) =>
  h("a", { href: `#/experiments/${encodeURIComponent(key)}` }, text);

/** Replace what an element shows. */
export const show = (el, ...children) => el.replaceChildren(...flat(children));

/** An error as the admin reads it next to a form: the API's `code: message`, or why the master did not answer. */
export const errorText = (e) => (e && e.status ? `${e.code || e.status}: ${e.message}`
  : `The master did not answer (${(e && e.message) || e}).`);

/** A form whose submit runs `act()` (async) with its button disabled; the API's error is shown under it, and what
 *  `act` returns (a text) as its outcome. */
export function form(cls, fields, label, act) {
  const note = h("p.form-note", { role: "status" });
  const button = h("button.primary", { type: "submit" }, label);
  const el = h(`form.admin-form.${cls}`, { onsubmit: async (e) => {
    e.preventDefault();
    button.disabled = true;
    show(note);
    note.className = "form-note";
    try {
      show(note, (await act()) || "");
      note.classList.add("ok");
    } catch (err) {
      show(note, errorText(err));
      note.classList.add("error");
    } finally {
      button.disabled = false;
    }
  } }, fields, h("div.form-actions", {}, button), note);
  return el;
}

/** A labelled field. */
export const field = (label, input) => h("label.field", {}, h("span", {}, label), input);

/** Checkboxes, one per option, named `name`; `chosen(box)` reads the ticked ones back. */
export const choices = (name, options, ticked = []) => (options.length
  ? options.map((o) => h("label.check", {}, h("input", { type: "checkbox", name, value: o, checked: ticked.includes(o) }), o))
  : h("span.muted", {}, "none"));

export const chosen = (box) => [...box.querySelectorAll("input[type=checkbox]:checked")].map((i) => i.value);

/** Comma-separated words of a text input. */
export const words = (input) => input.value.split(",").map((x) => x.trim()).filter(Boolean);
