// Into a running task: its labelled ports opened through the master's proxy, and the command lines that reach it.
// A port link opens /proxy/{user}~{job}/{role}/{index}/{label}/ in a new tab once the master has set the proxy's
// session cookie for this browser (POST /api/v2/proxy/session, sent with the token like every call): the new tab
// carries no token of its own, only that cookie (Path=/proxy/). `ssh` is left out: it is no web page (`pai ssh`).
import { post } from "./api.js";
import { h } from "./dom.js";

/** The proxy's path of a task's labelled port. */
export const proxyPath = (key, role, index, label) =>
  `/proxy/${key.split("~").map(encodeURIComponent).join("~")}/${encodeURIComponent(role)}/${index}/${encodeURIComponent(label)}/`;

/** The Ports cell of a task: `label:port` each, a link for the labels a running task serves through the proxy. */
export function portCell(key, role, t, report) {
  const ports = Object.entries(t.containerPorts || {});
  if (!ports.length) return "—";
  return ports.map(([label, value], i) => [i ? " " : null,
    t.taskState === "RUNNING" && label !== "ssh" && value
      ? portLink(proxyPath(key, role, t.taskIndex, label), label, value, report) : `${label}:${value}`]);
}

function portLink(url, label, value, report) {
  return h("a.port-link", {
    href: url, target: "_blank", rel: "noopener noreferrer", "data-port": label,
    title: `Open ${label} (port ${value}) through the master, in a new tab`,
    onclick: (ev) => {
      ev.preventDefault();
      open(url).catch(report);
    },
  }, `${label}:${value}`, h("span.ext", { "aria-hidden": "true" }, " ↗"));
}

async function open(url) {
  await post("/api/v2/proxy/session");
  // Within the click's user activation (browsers allow a few seconds); noopener: the page gets no handle on this one
  window.open(url, "_blank", "noopener,noreferrer");
}

/** The command lines that reach into a running task: its logs for anyone who reads the job; exec, SSH and port
 *  forwarding for its owner and admins (the master refuses them to anyone else). */
export function connectLines(key, role, index, mayEnter, labels = []) {
  const task = `${key} --role ${role} --index ${index}`;
  const lines = [`pai logs ${task} -f`];
  if (mayEnter) {
    const label = labels.find((l) => l !== "ssh" && l !== "http") || "http";
    lines.push(`pai exec -it ${task} -- bash`,
      `pai ssh ${task}                 # with a key of yours (docs/interactive.md)`,
      `pai ssh ${task} --config >> ~/.ssh/config   # then VS Code Remote-SSH to the host it names`,
      `pai port-forward ${key} 8080:${label} --role ${role} --index ${index}   # localhost:8080 reaches its port`);
  }
  return lines.join("\n");
}
