// One job: its status, task roles (per-task state, node, ports — a running task's opened through the master's
// proxy —, exit code and spec), the waiting reason, a task's stdout and stderr followed live and the command lines
// that reach into it, its attempts and history (preemptions included); stop and clone; a trial's experiment.
import { ApiError, experimentPath, get, jobPath, post, put, request } from "./api.js";
import { badge, experimentLink, fmtDuration, fmtTime, h, panel, show, table } from "./dom.js";
import { logPane } from "./logs.js";
import { connectLines, portCell } from "./ports.js";
import { waitingBox } from "./waiting.js";

const ACTIVE = ["WAITING", "RUNNING"];
const TRIAL = /^(.+~.+)-trial-(\d+)$/; // a trial's job: <user>~<experiment>-trial-<n>

/** The experiment of a trial's job, read once: {key, number}, or null (not a trial: a job may have such a name). */
async function trialOf(key) {
  const m = TRIAL.exec(key);
  if (!m) return null;
  try {
    const e = await get(experimentPath(m[1]));
    const t = e.trials.find((x) => x.jobName === key);
    return t ? { key: e.key, number: t.number } : null;
  } catch {
    return null;
  }
}

export function mount(root, ctx) {
  const key = ctx.params[0];
  const title = h("h1", {}, key, " ");
  const actions = h("div.actions");
  const info = h("div"), waiting = h("div"), roles = h("div"), attempts = h("div"), events = h("div");
  const logs = logPane(key);
  const clone = cloneEditor(ctx);
  // shown once the job has been read (a job that does not exist gets a sentence instead, and is not read again)
  const layout = [h("div.title-row", {}, title, actions), clone.panel, info, waiting,
    panel("Task roles", roles), logs.panel, panel("Job attempts", attempts), panel("History", events)];
  let detail = null, missing = false;
  const trial = trialOf(key);

  async function refresh() {
    if (missing) return;
    let d, tries, exp;
    try {
      [d, tries, exp] = await Promise.all([get(jobPath(key)), get(`${jobPath(key)}/job-attempts`), trial]);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      missing = true;
      logs.close();
      show(root, noSuchJob(key));
      return;
    }
    if (!layout[0].isConnected) root.append(...layout);
    detail = d;
    const st = d.jobStatus;
    show(title, key, " ", badge(st.state));
    show(actions, mayStop(st) ? h("button.danger", { type: "button", id: "stop", onclick: stop }, "Stop") : null,
      h("button", { type: "button", id: "clone", onclick: () => clone.open(key, d.name) }, "Clone"));
    show(info, panel(null, facts(d, exp)));
    show(waiting, st.waitingReason ? panel("Why it waits", waitingBox(st.waitingReason)) : null);
    show(roles, Object.entries(d.taskRoles).map(([role, r]) =>
      roleTable(role, r.taskStatuses, logs.select, (t) => portCell(key, role, t, ctx.report))));
    logs.tasks(d, (role, index, labels) => connectLines(key, role, index, mayEnter(st), labels));
    show(attempts, attemptTable(tries));
    show(events, eventTable(d.events));
  }

  const mayEnter = (st) => ctx.session.admin || ctx.session.user === st.username;
  const mayStop = (st) => ACTIVE.includes(st.state) && mayEnter(st);

  async function stop() {
    try {
      await put(`${jobPath(key)}/executionType`, { value: "STOP" });
      ctx.report(null);
    } catch (e) {
      ctx.report(e);
    }
    await refresh().catch(ctx.report);
  }

  return { title: key, refresh, interval: 2000, unmount: () => logs.close() };
}

function noSuchJob(key) {
  return h("section.panel.missing", {}, h("h1", {}, "No such job"),
    h("p", {}, "There is no job ", h("b", {}, key), ": it may have been deleted, or the link is wrong."),
    h("p", {}, h("a", { href: "#/jobs" }, "All jobs")));
}

function facts(d, trial) {
  const st = d.jobStatus;
  const spec = st.appExitSpec;
  const rows = [
    ...(trial ? [["Experiment",
      h("span", { id: "experiment" }, experimentLink(trial.key), ` trial ${trial.number}`)]] : []),
    ["User", st.username], ["Virtual cluster", st.virtualCluster], ["Priority", `${d.jobPriority} (${st.priority})`],
    ["Submitted", fmtTime(st.submissionTime)], ["Started", fmtTime(st.launchedTime)],
    ["Completed", fmtTime(st.completedTime)],
    ["Duration", st.launchedTime ? fmtDuration((st.completedTime || Date.now()) - st.launchedTime) : "—"],
    ["Retries", `${st.retryDetails.user} counted, ${st.retryDetails.platform} by the platform`],
    ["Exit code", st.appExitCode === null ? "—" : String(st.appExitCode)],
    ["Exit type", spec ? `${spec.phrase} (${spec.type}, retry: ${spec.retry})` : "—"],
    ["Diagnostics", st.appExitDiagnostics || "—"],
  ];
  if (d.tags.length) rows.push(["Tags", d.tags.join(", ")]);
  return h("dl.facts", {}, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** A task's GPUs: how many, then which (their indices on its node): "2 (#0, #1)"; "—" before it is placed. */
function gpus(t) {
  const held = t.containerGpus || [];
  if (!t.containerNodeName && !held.length) return "—";
  return held.length ? `${held.length} (${held.map((i) => `#${i}`).join(", ")})` : "0";
}

function roleTable(role, tasks, select, ports) {
  const exit = (t) => (t.containerExitSpec ? `${t.containerExitSpec.phrase} (${t.containerExitSpec.type})` : "—");
  return h("div.role", { "data-role": role }, h("h3", {}, role, h("span.muted", {}, ` ${tasks.length} instance${tasks.length > 1 ? "s" : ""}`)),
    table([
      { title: "#", cell: (t) => String(t.taskIndex), class: "num" },
      { title: "State", cell: (t) => badge(t.taskState || "—") },
      { title: "Node", cell: (t) => t.containerNodeName || "—" },
      { title: "Address", cell: (t) => t.containerIp || "—" },
      { title: "Ports", cell: ports },
      { title: "GPUs", cell: gpus, class: "task-gpus" },
      { title: "Exit code", cell: (t) => (t.containerExitCode === null ? "—" : String(t.containerExitCode)), class: "num" },
      { title: "Exit", cell: exit },
      { title: "Retries", cell: (t) => String(t.retries), class: "num" },
      { title: "Diagnostics", cell: (t) => t.containerExitDiagnostics || "", class: "reason" },
      { title: "", cell: (t) => h("button", { type: "button", class: "small", disabled: !t.containerId,
        onclick: () => select(role, t.taskIndex) }, "Logs") },
    ], tasks, { rowAttrs: (t) => ({ "data-task": `${role}-${t.taskIndex}` }) }));
}

function attemptTable(tries) {
  return table([
    { title: "Attempt", cell: (a) => String(a.attemptIndex), class: "num" },
    { title: "State", cell: (a) => badge(a.state) },
    { title: "Started", cell: (a) => fmtTime(a.attemptStartedTime) },
    { title: "Completed", cell: (a) => fmtTime(a.attemptCompletedTime) },
    { title: "Exit code", cell: (a) => (a.exitCode === null ? "—" : String(a.exitCode)), class: "num" },
    { title: "Exit", cell: (a) => a.exitPhrase || "—" },
    { title: "Trigger", cell: (a) => a.appExitTriggerMessage || "", class: "reason" },
  ], [...tries].reverse(), { empty: "No attempt yet: the job has not started." });
}

function eventTable(events) {
  return table([
    { title: "Time", cell: (e) => fmtTime(e.time) },
    { title: "Event", cell: (e) => h("span.event", { class: `ev-${e.kind}` }, e.kind) },
    { title: "What happened", cell: (e) => e.message, class: "reason" },
  ], [...events].reverse(), { rowAttrs: (e) => ({ class: e.kind === "preempted" ? "preempted" : "" }) });
}

/** Clone: the job's config as submitted, in an editable text area under a new name; submitted as a new job. */
function cloneEditor(ctx) {
  const text = h("textarea", { spellcheck: "false", rows: 18, "aria-label": "job configuration" });
  const error = h("p.error", { role: "alert" });
  const submit = h("button.primary", { type: "button", id: "submit-clone" }, "Submit copy");
  const box = h("section.panel.clone", { hidden: true }, h("h2", {}, "Clone: edit, then submit as a new job"), text,
    h("div.row", {}, submit, h("button", { type: "button", onclick: () => { box.hidden = true; } }, "Cancel")), error);
  let json = false;
  submit.addEventListener("click", async () => {
    submit.disabled = true;
    show(error);
    try {
      const out = await post("/api/v2/jobs", { body: text.value, contentType: json ? "application/json" : "text/yaml" });
      box.hidden = true;
      ctx.navigate(`#/jobs/${encodeURIComponent(out.jobName)}`);
    } catch (e) {
      show(error, e instanceof ApiError ? `${e.code}: ${e.message}` : String(e));
    } finally {
      submit.disabled = false;
    }
  });

  async function open(key, name) {
    const resp = await request("GET", `${jobPath(key)}/config`, { raw: true });
    json = (resp.headers.get("Content-Type") || "").includes("json");
    const config = await resp.text();
    const copy = `${name}-clone-${Math.random().toString(36).slice(2, 6)}`;
    text.value = json ? JSON.stringify({ ...JSON.parse(config), jobName: copy }, null, 2)
      : config.replace(/^name:.*$/m, `name: ${copy}`);
    show(error);
    box.hidden = false;
    text.focus();
  }
  return { panel: box, open: (key, name) => open(key, name).catch(ctx.report) };
}
