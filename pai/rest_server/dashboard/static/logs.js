// A task's stdout and stderr. A task that runs (or waits for its next attempt) is followed: one streaming read of
// each (`?follow=true&tail=`, the master's chunked answer across the task's attempts, with a line
// `==> attempt N of role[i] on node X <==` where a new one starts), appended as text arrives, until the master ends
// the stream when the task has ended. A task that has ended is read once (its tail); one that has not started (no
// attempt yet, or placed and not yet running) is not read at all until it runs. The view stays at the end unless the
// reader scrolled up. Until the reader picks a task, a failed job's panes show the task whose exit failed it.
import { ApiError, jobPath, request } from "./api.js";
import { h, show } from "./dom.js";

const TAIL = 65536;
const KEEP = 4 * TAIL; // characters kept in a followed pane; older text is dropped as new text arrives
const RETRY_MS = 3000; // a follow that broke (network, master restarted) starts again, from the tail, this late
const ENDED = ["SUCCEEDED", "FAILED", "STOPPED"];

export function logPane(key) {
  const picker = h("select", { "aria-label": "task", onchange: () => pick(...picker.value.split("\u0000")) });
  const streams = Object.fromEntries(["stdout", "stderr"].map((s) => [s, {
    name: s, pre: h("pre.log", { "data-stream": s, tabindex: 0 }), note: h("span.muted"), reader: null, done: false,
    size: 0 }]));
  const connectText = h("pre.connect-lines");
  const connect = h("details.connect", { hidden: true }, h("summary", {}, "Connect to this task"), connectText);
  const panel = h("section.panel.logs", {}, h("h2", {}, "Output ", picker), connect,
    h("div.log-grid", {}, Object.values(streams).map((st) =>
      h("div", {}, h("h3", {}, st.name, " ", st.note), st.pre))));
  // task: {role, index}; mode: what the panes show for it now ("none" | "follow" | "once"), and the attempt it
  // was chosen for (a new attempt of an ended task is followed again).
  let task = null, mode = null, closed = false, options = "", byKey = new Map(), hint = () => null;

  /** The job's detail, each time the page reads it: the tasks to pick from, and what the chosen one needs.
   *  `connectHint(role, index, labels)`: the command lines shown for a running task. */
  function tasks(detail, connectHint = () => null) {
    hint = connectHint;
    const all = Object.entries(detail.taskRoles).flatMap(([role, r]) => r.taskStatuses.map((t) => ({ role, t })));
    byKey = new Map(all.map(({ role, t }) => [`${role}\u0000${t.taskIndex}`, t]));
    const signature = all.map(({ role, t }) => `${role}[${t.taskIndex}]`).join(",");
    if (signature !== options) {
      options = signature;
      picker.replaceChildren(...all.map(({ role, t }) =>
        h("option", { value: `${role}\u0000${t.taskIndex}` }, `${role}[${t.taskIndex}]`)));
    }
    const first = !task || !task.picked ? opening(detail.jobStatus, all) : null;
    if (first && (!task || task.role !== first.role || task.index !== String(first.t.taskIndex))) {
      choose(first.role, String(first.t.taskIndex), false);
    } else {
      update();
    }
  }

  /** The task the panes show until the reader picks one: of a failed job, the task whose exit failed it (else its
   *  first failed task); else the first that has an attempt; else the first. */
  function opening(st, all) {
    const failed = st.state === "FAILED" && (
      all.find(({ role, t }) => role === st.appExitTriggerTaskRoleName && t.taskIndex === st.appExitTriggerTaskIndex)
      || all.find(({ t }) => t.taskState === "FAILED"));
    return failed || all.find(({ t }) => t.containerId) || all[0];
  }

  const status = (t) => byKey.get(`${t.role}\u0000${t.index}`) || {};

  function choose(role, index, picked) {
    const same = task && task.role === role && task.index === index;
    task = { role, index, picked: picked || Boolean(same && task.picked) };
    picker.value = `${role}\u0000${index}`;
    if (!same) {
      stopAll();
      mode = null;
    }
    update();
  }

  const pick = (role, index) => choose(role, String(index), true);

  /** Start what the chosen task's state asks for, if it is not what the panes do already. */
  function update() {
    if (closed || !task) return;
    const t = status(task);
    const lines = t.taskState === "RUNNING" ? hint(task.role, task.index, Object.keys(t.containerPorts || {})) : null;
    connect.hidden = !lines;
    if (lines && connectText.textContent !== lines) connectText.textContent = lines;
    // Nothing is read of a task that has not started (no attempt yet, or placed and not yet running): an open
    // follow carries its next attempt (a task retried), another starts once it runs.
    const want = !t.containerId || t.taskState === "WAITING" ? "none" : ENDED.includes(t.taskState) ? "once" : "follow";
    if (settled(want, t.containerId)) return;
    stopAll();
    mode = { want, attempt: t.containerId };
    for (const st of Object.values(streams)) {
      if (want === "none") {
        clear(st, `No output yet: ${task.role}[${task.index}] has not started.`);
        show(st.note);
      } else if (want === "once") {
        readOnce(st, task, mode);
      } else {
        follow(st, task);
      }
    }
  }

  /** Whether the panes already do what the task's state asks for. */
  function settled(want, attempt) {
    if (!mode) return false;
    const all = Object.values(streams);
    if (want === "none") return mode.want === "none" || (mode.want === "follow" && all.some((st) => st.reader));
    if (want === "once") { // read once per attempt; a follow that ended with the task (or still ends) has it all
      return mode.want === "once" ? mode.attempt === attempt
        : mode.want === "follow" && all.every((st) => st.done || st.reader);
    }
    // Following: a stream still open carries every new attempt; one that ended is opened again for a new attempt
    // (a broken one is opened again by its own timer).
    return mode.want === "follow" && (all.some((st) => st.reader) || mode.attempt === attempt);
  }

  async function readOnce(st, asked, m) {
    const url = `${logUrl(asked, st.name)}?tail=${TAIL}`;
    try {
      const resp = await request("GET", url, { raw: true });
      const size = Number(resp.headers.get("X-Log-Size") || 0);
      const text = await resp.text();
      if (m !== mode) return;
      clear(st, text || "(empty)");
      show(st.note, size > TAIL ? `${size.toLocaleString()} bytes, the last ${TAIL / 1024} KiB shown`
        : `${size.toLocaleString()} bytes`);
      st.pre.scrollTop = st.pre.scrollHeight;
    } catch (e) {
      if (m === mode) failed(st, e);
    }
  }

  async function follow(st, asked) {
    const abort = new AbortController();
    st.reader = abort;
    st.done = false;
    clear(st, "");
    show(st.note, "following…");
    try {
      const resp = await request("GET", `${logUrl(asked, st.name)}?follow=true&tail=${TAIL}`,
        { raw: true, signal: abort.signal });
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        append(st, decoder.decode(value, { stream: true }));
      }
      append(st, decoder.decode());
      if (st.reader !== abort) return;
      st.reader = null;
      st.done = true;
      if (!st.size) clear(st, "(empty)");
      show(st.note, "ended");
    } catch (e) {
      if (st.reader !== abort || abort.signal.aborted) return;
      st.reader = null;
      failed(st, e);
      if (e instanceof ApiError) return; // refused (the job is gone, or no longer readable): the page says so
      // A stream that broke before the task ended: follow again from the tail, unless another read took over.
      setTimeout(() => { if (!closed && asked === task && !st.reader && mode && mode.want === "follow") follow(st, asked); },
        RETRY_MS);
    }
  }

  function append(st, text) {
    if (!text) return;
    const pre = st.pre;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    pre.append(text);
    st.size += text.length;
    while (st.size > KEEP && pre.firstChild !== pre.lastChild) {
      st.size -= pre.firstChild.textContent.length;
      pre.firstChild.remove();
    }
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function clear(st, text) {
    st.size = 0;
    if (st.pre.textContent !== text || st.pre.childNodes.length > 1) st.pre.textContent = text;
  }

  function failed(st, e) {
    clear(st, e instanceof ApiError && e.status === 404 ? `No output yet (${e.message}).`
      : `Could not read it: ${e.message}`);
    show(st.note);
  }

  const logUrl = (t, stream) => `${jobPath(key)}/tasks/${encodeURIComponent(t.role)}/${t.index}/logs/${stream}`;

  function stopAll() {
    for (const st of Object.values(streams)) {
      if (st.reader) st.reader.abort();
      st.reader = null;
    }
  }

  return {
    panel, tasks,
    select: pick,
    close: () => { closed = true; stopAll(); },
  };
}
