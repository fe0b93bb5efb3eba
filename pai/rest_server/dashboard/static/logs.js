// A task's stdout and stderr, followed live: the tail of each (the task log API's `tail`) is read again every
// second while the job is active and shown when its size changed; the view stays at the end unless scrolled up.
import { ApiError, jobPath, request } from "./api.js";
import { h, show } from "./dom.js";

const TAIL = 65536;
const EVERY_ACTIVE = 1000, EVERY_ENDED = 5000;

export function logPane(key) {
  const picker = h("select", { "aria-label": "task", onchange: () => pick(...picker.value.split("\u0000")) });
  const streams = Object.fromEntries(["stdout", "stderr"].map((s) => [s, {
    pre: h("pre.log", { "data-stream": s, tabindex: 0 }), note: h("span.muted"), size: null, attempt: null }]));
  const panel = h("section.panel.logs", {}, h("h2", {}, "Output ", picker),
    h("div.log-grid", {}, Object.entries(streams).map(([name, st]) =>
      h("div", {}, h("h3", {}, name, " ", st.note), st.pre))));
  let task = null, active = true, timer = 0, closed = false, options = "", reading = false, again = false;

  function tasks(detail) {
    active = ["WAITING", "RUNNING", "STOPPING"].includes(detail.jobStatus.state);
    const all = Object.entries(detail.taskRoles).flatMap(([role, r]) => r.taskStatuses.map((t) => ({ role, t })));
    const signature = all.map(({ role, t }) => `${role}[${t.taskIndex}]`).join(",");
    if (signature !== options) {
      options = signature;
      picker.replaceChildren(...all.map(({ role, t }) =>
        h("option", { value: `${role}\u0000${t.taskIndex}` }, `${role}[${t.taskIndex}]`)));
    }
    if (!task || !task.started) {
      const first = all.find(({ t }) => t.containerId) || all[0];
      if (first) pick(first.role, String(first.t.taskIndex), Boolean(first.t.containerId));
    }
  }

  function pick(role, index, started = true) {
    const same = task && task.role === role && task.index === index;
    task = { role, index, started };
    picker.value = `${role}\u0000${index}`;
    if (same) return;
    for (const st of Object.values(streams)) {
      st.size = st.attempt = null;
      st.pre.textContent = "";
    }
    kick();
  }

  function kick() {  // read now: at once if no read is under way, else as soon as it is done
    if (reading) {
      again = true;
      return;
    }
    clearTimeout(timer);
    poll();
  }

  async function poll() {
    if (closed || !task) return;
    reading = true;
    try {
      await Promise.all(Object.entries(streams).map(([name, st]) => read(name, st)));
    } finally {
      reading = false;
    }
    if (!closed) timer = setTimeout(poll, again ? 0 : active ? EVERY_ACTIVE : EVERY_ENDED);
    again = false;
  }

  async function read(name, st) {
    const asked = task;
    const url = `${jobPath(key)}/tasks/${encodeURIComponent(asked.role)}/${asked.index}/logs/${name}?tail=${TAIL}`;
    try {
      const resp = await request("GET", url, { raw: true });
      const size = Number(resp.headers.get("X-Log-Size") || 0), attempt = resp.headers.get("X-Attempt-Id");
      if (asked !== task || (size === st.size && attempt === st.attempt)) return;
      const text = await resp.text();
      const atEnd = st.pre.scrollTop + st.pre.clientHeight >= st.pre.scrollHeight - 8;
      st.pre.textContent = text || "(empty)";
      st.size = size;
      st.attempt = attempt;
      show(st.note, size > TAIL ? `${size.toLocaleString()} bytes, the last ${TAIL / 1024} KiB shown` : `${size.toLocaleString()} bytes`);
      if (atEnd) st.pre.scrollTop = st.pre.scrollHeight;
    } catch (e) {
      if (asked !== task) return;
      const text = e instanceof ApiError && e.status === 404 ? `No output yet (${e.message}).`
        : `Could not read it: ${e.message}`;
      if (st.pre.textContent !== text) st.pre.textContent = text;
      st.size = null;
      show(st.note);
    }
  }

  return {
    panel, tasks,
    select: (role, index) => pick(role, String(index)),
    close: () => { closed = true; clearTimeout(timer); },
  };
}
