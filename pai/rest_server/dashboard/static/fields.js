// One field of a job document, read and set in its text, so that the page's pickers (the VC, a clone's name) change
// it and leave the rest as the user wrote it: JSON is parsed and written again; YAML is edited line by line (block
// style, and a flow mapping `defaults: {virtualCluster: a}` as the last level). No YAML library: the master parses.

/** What the document is: {syntax: json|yaml, kind: job|experiment, version: 1|2}; picks where it is posted. */
export function kindOf(text) {
  if (text.trimStart().startsWith("{")) {
    const doc = parseJson(text);
    const version = doc && ("protocolVersion" in doc) ? 2 : 1;
    return { syntax: "json", kind: doc && doc.type === "experiment" ? "experiment" : "job", version };
  }
  const experiment = /^type\s*:\s*["']?experiment["']?\s*(#.*)?$/m.test(text);
  const version = /^protocolVersion\s*:/m.test(text) || !/^jobName\s*:/m.test(text) ? 2 : 1;
  return { syntax: "yaml", kind: experiment ? "experiment" : "job", version };
}

/** Where a document names its VC: a v1 job's virtualCluster, a v2 job's defaults, an experiment's trial's. */
export function vcPath({ kind, version }) {
  if (kind === "experiment") return ["trial", "defaults", "virtualCluster"];
  return version === 1 ? ["virtualCluster"] : ["defaults", "virtualCluster"];
}

/** The document's name field. */
export const namePath = ({ kind, version }) => (kind === "job" && version === 1 ? ["jobName"] : ["name"]);

function parseJson(text) {
  try { const doc = JSON.parse(text); return doc && typeof doc === "object" && !Array.isArray(doc) ? doc : null; }
  catch { return null; }
}

const indentOf = (line) => line.length - line.trimStart().length;
const blank = (line) => !line.trim() || line.trimStart().startsWith("#");
const scalar = (raw) => raw.replace(/\s+#.*$/, "").trim().replace(/^(["'])(.*)\1$/, "$2");

/** The line of `key:` at `indent` within lines[from, to), or -1. */
function find(lines, from, to, indent, key) {
  for (let i = from; i < to; i++) {
    if (!blank(lines[i]) && indentOf(lines[i]) === indent && lines[i].trimStart().startsWith(`${key}:`)) return i;
  }
  return -1;
}

/** The lines under line i (more indented than it) and their indentation. */
function children(lines, i) {
  const own = indentOf(lines[i]);
  let end = i + 1, indent = null;
  for (; end < lines.length; end++) {
    if (blank(lines[end])) continue;
    if (indentOf(lines[end]) <= own) break;
    if (indent === null) indent = indentOf(lines[end]);
  }
  while (end > i + 1 && !lines[end - 1].trim()) end--; // trailing blank lines belong to what follows
  return { from: i + 1, to: end, indent: indent === null ? own + 2 : indent };
}

const FLOW = /^\{(.*)\}$/;

/** The field's value as text, or undefined. */
export function getField(text, path) {
  if (text.trimStart().startsWith("{")) {
    let node = parseJson(text);
    for (const key of path) node = node && typeof node === "object" ? node[key] : undefined;
    return node === undefined || node === null ? undefined : String(node);
  }
  const lines = text.split("\n");
  let range = { from: 0, to: lines.length, indent: 0 };
  for (const [n, key] of path.entries()) {
    const i = find(lines, range.from, range.to, range.indent, key);
    if (i < 0) return undefined;
    const rest = lines[i].trimStart().slice(key.length + 1).replace(/\s+#.*$/, "").trim();
    if (n === path.length - 1) return scalar(rest);
    const flow = FLOW.exec(rest);
    if (flow && n === path.length - 2) {
      const m = new RegExp(`(?:^|,)\\s*${path[n + 1]}\\s*:\\s*([^,}]*)`).exec(flow[1]);
      return m ? scalar(m[1]) : undefined;
    }
    range = children(lines, i);
  }
  return undefined;
}

/** The text with the field set to `value` (created with its parents where missing), or null where it cannot be
 *  (JSON that does not parse). */
export function setField(text, path, value) {
  if (text.trimStart().startsWith("{")) {
    const doc = parseJson(text);
    if (!doc) return null;
    let node = doc;
    for (const key of path.slice(0, -1)) {
      if (!node[key] || typeof node[key] !== "object") node[key] = {};
      node = node[key];
    }
    node[path[path.length - 1]] = value;
    return JSON.stringify(doc, null, 2) + "\n";
  }
  const lines = text.split("\n");
  let range = { from: 0, to: lines.length, indent: 0 };
  while (range.to > 0 && !lines[range.to - 1].trim()) range.to--;
  for (const [n, key] of path.entries()) {
    const i = find(lines, range.from, range.to, range.indent, key);
    const pad = " ".repeat(range.indent);
    if (i < 0) { // this key and those under it, at the end of the block
      const added = path.slice(n).map((k, j) => `${pad}${"  ".repeat(j)}${k}:${j === path.length - n - 1 ? ` ${value}` : ""}`);
      lines.splice(range.to, 0, ...added);
      return lines.join("\n");
    }
    const rest = lines[i].trimStart().slice(key.length + 1);
    if (n === path.length - 1) {
      const comment = /\s+#.*$/.exec(rest);
      lines[i] = `${pad}${key}: ${value}${comment ? comment[0] : ""}`;
      return lines.join("\n");
    }
    const flow = FLOW.exec(rest.trim());
    if (flow && n === path.length - 2) {
      const last = path[n + 1];
      const re = new RegExp(`((?:^|,)\\s*${last}\\s*:\\s*)([^,}]*)`);
      const inner = re.test(flow[1]) ? flow[1].replace(re, `$1${value}`)
        : `${flow[1].trim() ? `${flow[1].trim()}, ` : ""}${last}: ${value}`;
      lines[i] = `${pad}${key}: {${inner.trim()}}`;
      return lines.join("\n");
    }
    range = children(lines, i);
  }
  return lines.join("\n");
}
