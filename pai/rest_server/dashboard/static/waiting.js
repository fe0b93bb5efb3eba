// Why a job waits, as the scheduler says it (`waitingReason`: code, message, position, figures): its place in the
// queue and the message, a sentence (the unblock hint, when there is one, is its last clause). The figures the
// message was made from are behind a toggle, as words and plain values (never JSON): the reason's code, then
// each figure by name; the unblock hint's figures nested under it.
import { fmtTime, h } from "./dom.js";

const NAMES = {
  role: "Task role", tasks: "Tasks", vc: "Virtual cluster", user: "User", node: "Node", nodes: "Nodes",
  needGpu: "GPUs a task needs", needNodes: "Nodes needed", haveNodes: "Nodes that fit", largestFreeGpu:
    "Most free GPUs on one node", unblock: "What would unblock it", kind: "How", have: "GPUs free there",
  need: "GPUs needed there", jobs: "Jobs that would have to end", eta: "Expected start", etaFrom: "Expected from",
  changes: "Changes", field: "Limit", now: "Now",
};
const KINDS = {
  nodeGpus: "more free GPUs on one node", jobsExit: "running jobs ending", vcLimit: "a higher VC max",
  userLimit: "a higher per-user limit", lendingLimit: "a higher lending limit",
};

/** The "Why it waits" box of a waiting job. */
export function waitingBox(r) {
  const figures = Object.entries(r.figures || {});
  return h("div.waiting", {}, h("p", {}, h("b", {}, `#${r.position} in its VC's queue. `), r.message),
    h("details.figures", {}, h("summary.muted", {}, "Details"),
      h("dl.figures", {}, item("Reason", r.code), figures.map(([k, v]) => item(name(k), value(k, v))))));
}

const item = (k, v) => (v === null ? null : [h("dt", {}, k), h("dd", {}, v)]);

/** A figure's name: ours, else its camelCase as words ("largestFreeGpu" -> "Largest free gpu"). */
function name(key) {
  if (NAMES[key]) return NAMES[key];
  const words = key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A figure's value as text (a list joined, or one line an object; an object as its own list, an ETA as a time);
 *  null: left out. */
function value(key, v) {
  if (v === null || v === undefined) return null;
  if (key === "kind") return KINDS[v] || name(String(v)).toLowerCase();
  if (key === "eta" && typeof v === "number") return fmtTime(v * 1000);
  if (Array.isArray(v)) {
    if (!v.length) return "none";
    return v.some((x) => x && typeof x === "object") ? h("ul", {}, v.map((x) => h("li", {}, plain(x)))) : v.join(", ");
  }
  if (typeof v === "object") {
    return h("dl.figures", {}, Object.entries(v).map(([k, x]) => item(name(k), value(k, x))));
  }
  if (typeof v === "boolean") return v ? "yes" : "no";
  return String(v);
}

/** An object in a list, in one line: "name value; name value". */
const plain = (o) => (o && typeof o === "object" ? Object.entries(o).filter(([, x]) => x !== null && x !== undefined)
  .map(([k, x]) => `${name(k).toLowerCase()} ${Array.isArray(x) ? x.join(", ") : plain(x)}`).join("; ") : String(o));
