// Submit a job or an experiment (#/submit; #/submit?clone=USER~NAME, #/submit?template=NAME): a document in the editor
// (a template from the master's examples/, a job's config to clone, or the user's own), checked by the master as it
// is typed (a dry run: POST …?dryRun=true runs the submission's own checks and stores nothing; an error's line is
// marked), a VC picker with each VC the user may use, its free capacity and its queue, and Submit, which opens the
// new job or experiment. Where the document goes follows from it: `type: experiment` to /api/v2/experiments.
import { ApiError, get, jobPath, request } from "./api.js";
import { fmtMb, h, jobLink, panel, show } from "./dom.js";
import { editor } from "./editor.js";
import { getField, kindOf, namePath, setField, vcPath } from "./fields.js";

const CHECK_AFTER = 400; // ms after the last change: the master checks the document then

const endpoint = (doc) => (doc.kind === "experiment" ? "/api/v2/experiments" : "/api/v2/jobs");

export function mount(root, ctx) {
  const ed = editor({ label: "job document", onInput: () => schedule() });
  const templates = h("select", { id: "template", onchange: () => pickTemplate(templates.value) },
    h("option", { value: "" }, "Start from a template…"));
  const vcs = h("select", { id: "vc", onchange: () => pickVc(vcs.value) }, h("option", { value: "" }, "—"));
  const target = h("span.muted", { id: "target" });
  const check = h("div.check", { id: "check", role: "status" });
  const button = h("button.primary", { type: "button", id: "submit", onclick: submit }, "Submit");
  const done = h("div", { id: "submitted" });
  root.append(h("div.title-row", {}, h("h1", {}, "Submit a job"), h("div.actions", {}, button)),
    h("form.filters", { onsubmit: (e) => e.preventDefault() }, h("label", {}, "Template ", templates),
      h("label", {}, "Virtual cluster ", vcs), target),
    done, panel(null, ed.el, check));
  let timer = 0, seq = 0, controller = null, shipped = [], mine = null;

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(validate, CHECK_AFTER);
  }

  const send = (text, doc, dry, signal) => request("POST", endpoint(doc) + (dry ? "?dryRun=true" : ""),
    { body: text, contentType: doc.syntax === "json" ? "application/json" : "text/yaml", signal });

  async function validate() {
    clearTimeout(timer);
    if (controller) controller.abort();
    const text = ed.value, doc = kindOf(text), asked = ++seq;
    show(target, text.trim() ? `${doc.kind === "experiment" ? "an experiment" : `a v${doc.version} job`} ` +
      `(${doc.syntax.toUpperCase()}) → POST ${endpoint(doc)}` : "");
    selectVc(getField(text, vcPath(doc)));
    if (!text.trim()) {
      ed.mark(null);
      check.dataset.state = "empty";
      show(check, h("span.muted", {}, "Pick a template, or write a job (YAML, protocol v2) or a v1 job (JSON)."));
      return;
    }
    controller = new AbortController();
    check.dataset.state = "checking";
    try {
      const answer = await send(text, doc, true, controller.signal);
      if (asked !== seq) return;
      ed.mark(null);
      check.dataset.state = "ok";
      show(check, h("span.ok", {}, `✓ The master accepts it as ${answer.jobName || answer.experimentName}.`),
        warningList(answer.warnings));
    } catch (e) {
      if (asked === seq && e.name !== "AbortError") refused(e);
    }
  }

  function refused(e) {
    if (!(e instanceof ApiError)) {
      check.dataset.state = "unchecked";
      show(check, h("span.muted", {}, "Not checked: the master did not answer."));
      ctx.report(e);
      return;
    }
    const text = `${e.code}: ${e.message}`;
    ed.mark(e.line || null, text);
    check.dataset.state = "error";
    check.dataset.line = e.line || "";
    show(check, h("p.error", {}, e.line ? h("button.link-line", { type: "button", onclick: () => ed.reveal(e.line) },
      `line ${e.line}`) : null, e.line ? " " : null, text));
  }

  async function submit() {
    clearTimeout(timer);
    seq++;
    if (controller) controller.abort();
    const text = ed.value, doc = kindOf(text);
    button.disabled = true;
    check.dataset.state = "submitting";
    check.dataset.line = "";
    try {
      const answer = await send(text, doc, false);
      if (doc.kind === "experiment") {
        ctx.navigate(`#/experiments/${encodeURIComponent(answer.experimentName)}`);
      } else if (answer.warnings && answer.warnings.length) { // shown here, with the way to the job
        show(done, h("section.panel.submitted", {}, h("h2", {}, "Submitted: ", jobLink(answer.jobName)),
          h("p", {}, "Accepted, with warnings (fields this cluster does not honour, or what no node of it could hold):"), warningList(answer.warnings)));
      } else {
        ctx.navigate(`#/jobs/${encodeURIComponent(answer.jobName)}`);
      }
    } catch (e) {
      refused(e);
    } finally {
      button.disabled = false;
    }
  }

  function load(text) {
    ed.value = text;
    show(done);
    validate();
  }

  function pickTemplate(name) {
    const t = shipped.find((x) => x.name === name);
    templates.value = ""; // an action, not a state: the same template can be picked again
    if (t) load(t.text);
  }

  function pickVc(name) {
    if (!name) return;
    const text = setField(ed.value, vcPath(kindOf(ed.value)), name);
    if (text === null) refused(new ApiError(400, "InvalidProtocolError", "the JSON does not parse: fix it first"));
    else load(text);
  }

  function selectVc(name) {
    const known = [...vcs.options].some((o) => o.value === (name || "default"));
    vcs.value = known ? name || "default" : "";
  }

  async function start() {
    const clone = ctx.query.get("clone");
    const [list] = await Promise.all([get("/api/v2/job-templates"), clone ? cloneOf(clone).then(load) : null]);
    shipped = list;
    templates.append(...list.map((t) => h("option", { value: t.name }, `${t.name} (${t.kind}, ${t.syntax})`)));
    const asked = ctx.query.get("template");
    if (!clone && asked) {
      pickTemplate(asked);
    } else if (!clone) {
      validate();
    }
  }

  async function refresh() {
    if (!mine) {
      const me = await get(`/api/v2/users/${encodeURIComponent(ctx.session.user)}`);
      mine = (vc) => me.admin || me.virtualCluster.includes(vc);
    }
    const all = Object.values(await get("/api/v2/virtual-clusters")).filter((v) => mine(v.name))
      .sort((a, b) => a.name.localeCompare(b.name));
    const queues = await Promise.all(all.map((v) =>
      get(`/api/v2/virtual-clusters/${encodeURIComponent(v.name)}/queue?limit=1`)));
    const chosen = vcs.value;
    vcs.replaceChildren(h("option", { value: "" }, "—"), ...all.map((v, i) => vcOption(v, queues[i].total)));
    vcs.value = [...vcs.options].some((o) => o.value === chosen) ? chosen : "";
    if (!vcs.value) selectVc(getField(ed.value, vcPath(kindOf(ed.value))));
  }

  start().catch(ctx.report);
  return { title: "Submit", refresh, interval: 10000,
    unmount: () => { clearTimeout(timer); seq++; if (controller) controller.abort(); } };
}

/** A VC as an option: what it has free (up to its max) and how many jobs wait in it; one that takes no job is
 *  shown and disabled. */
function vcOption(v, waiting) {
  const free = (k) => Math.max(0, v.resourcesMax[k] - v.resourcesUsed[k]);
  const open = v.status === "running";
  const text = `${v.name}: free ${free("gpu")} GPU, ${free("cpu")} CPU, ${fmtMb(free("memoryMB"))}; ` +
    `${waiting} waiting${open ? "" : ` (${v.status})`}`;
  return h("option", { value: v.name, disabled: !open, "data-free-gpu": free("gpu"), "data-waiting": waiting }, text);
}

/** A job's config as submitted, under a new name, for a copy. */
async function cloneOf(key) {
  const resp = await request("GET", `${jobPath(key)}/config`, { raw: true });
  let text = await resp.text();
  if ((resp.headers.get("Content-Type") || "").includes("json")) text = JSON.stringify(JSON.parse(text), null, 2) + "\n";
  const doc = kindOf(text);
  const name = getField(text, namePath(doc)) || key.split("~").pop();
  const copy = `${name}-clone-${Math.random().toString(36).slice(2, 6)}`;
  return setField(text, namePath(doc), copy) || text;
}

function warningList(warnings) {
  if (!warnings || !warnings.length) return null;
  return h("ul.warnings", {}, warnings.map((w) => h("li.warn", {}, h("code", {}, w.field), ` ${w.message}`)));
}
