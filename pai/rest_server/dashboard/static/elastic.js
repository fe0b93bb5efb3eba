// An elastic job on its page (extras.elastic; issue 31): a role's size now and its range beside the role's title, a
// task a shrink is removing (exit -402, stopping) said to be leaving, and the job's resizes (its `resized` events).
import { badge, fmtTime, h, panel, table } from "./dom.js";

const SHRUNK = -402; // a task stopped because its elastic job shrank: it leaves the job once it exits

/** "size 3 (min 1, max 4)" for an elastic role (its members not leaving), null for a role of fixed size. */
export function sizeNote(role) {
  const e = role.elastic;
  if (!e) return null;
  return h("span.elastic-size", { "data-current": e.current },
    ` size ${e.current} (min ${e.minInstances}, max ${e.maxInstances})`);
}

/** Whether a shrink is removing the task (it is stopping, with the shrink's exit code). */
export const leaving = (t) => t.taskState === "STOPPING" && t.containerExitCode === SHRUNK;

/** A task's state: its badge, and for a task a shrink removes, that it is leaving. */
export const stateCell = (t) => (leaving(t)
  ? [badge(t.taskState), h("span.muted.leaving", {}, " leaving: the job shrank")]
  : badge(t.taskState || "—"));

/** The job's resizes, newest first (time, what happened), in a panel; null for a job with no elastic role. */
export function resizesPanel(d) {
  if (!Object.values(d.taskRoles).some((r) => r.elastic)) return null;
  const resized = d.events.filter((e) => e.kind === "resized").reverse();
  return panel("Resizes", h("div", { id: "resizes" }, table([
    { title: "Time", cell: (e) => fmtTime(e.time) },
    { title: "Resize", cell: (e) => e.message, class: "reason" },
  ], resized, { empty: "No resize yet: the job runs at the size it started with." })));
}
