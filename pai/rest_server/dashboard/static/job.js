// One job: its status, task roles (per-task state, node, ports — a running task's opened through the master's
// proxy —, exit code and spec), the waiting reason, a task's stdout and stderr followed live and the command lines
// that reach into it, its attempts and history (preemptions included); stop and clone (#/submit?clone=KEY); a trial's
// experiment; an elastic role's size and range, and the job's resizes (elastic.js).
import { ApiError, experimentPath, get, jobPath, put } from "./api.js";
import { badge, experimentLink, fmtDuration, fmtTime, h, panel, show, table } from "./dom.js";
import { leaving, resizesPanel, sizeNote, stateCell } from "./elastic.js";
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
  const info = h("div"), waiting = h("div"), roles = h("div"), resizes = h("div"), attempts = h("div");
  const events = h("div");
  const logs = logPane(key);
  // shown once the job has been read (a job that does not exist gets a sentence instead, and is not read again)
  const layout = [h("div.title-row", {}, title, actions), info, waiting,
    panel("Task roles", roles), resizes, logs.panel, panel("Job attempts", attempts), panel("History", events)];
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
      h("button", { type: "button", id: "clone", // the submit page, filled in with the job's config under a new name
        onclick: () => ctx.navigate(`#/submit?clone=${encodeURIComponent(key)}`) }, "Clone"));
    show(info, panel(null, facts(d, exp)));
    show(waiting, st.waitingReason ? panel("Why it waits", waitingBox(st.waitingReason)) : null);
    show(roles, Object.entries(d.taskRoles).map(([role, r]) =>
      roleTable(role, r, logs.select, (t) => portCell(key, role, t, ctx.report))));
    show(resizes, resizesPanel(d));
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

function roleTable(role, r, select, ports) {
  const tasks = r.taskStatuses;
  const exit = (t) => (t.containerExitSpec ? `${t.containerExitSpec.phrase} (${t.containerExitSpec.type})` : "—");
  const count = h("span.muted", {}, ` ${tasks.length} instance${tasks.length > 1 ? "s" : ""}`);
  return h("div.role", { "data-role": role }, h("h3", {}, role, count, sizeNote(r)),
    table([
      { title: "#", cell: (t) => String(t.taskIndex), class: "num" },
      { title: "State", cell: stateCell },
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
    ], tasks, { rowAttrs: (t) => ({ "data-task": `${role}-${t.taskIndex}`, class: leaving(t) && "leaving" }) }));
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
