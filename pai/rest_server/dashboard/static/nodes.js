// Every node: resources, the tasks on it, its last heartbeat and health; cordon, uncordon and drain for admins
// (PUT /api/v2/nodes/{node}/state, which refuses anyone else).
import { get, put } from "./api.js";
import { badge, bar, fmtAgo, h, jobLink, panel, show, table } from "./dom.js";

const ACTIONS = {  // what an admin may ask of a node in each state: [label, new state]
  READY: [["Cordon", "CORDONED"], ["Drain", "DRAINING"]],
  CORDONED: [["Uncordon", "READY"], ["Drain", "DRAINING"]],
  DRAINING: [["Uncordon", "READY"]],
  LOST: [],
};

export function mount(root, ctx) {
  const body = h("div");
  const note = h("p.muted", {}, ctx.session.admin ? "Cordon keeps new tasks off a node; drain also moves its running " +
    "jobs elsewhere (they are requeued without using a retry)." : "");
  root.append(h("h1", {}, "Nodes"), note, panel(null, body));
  let nodes = [];

  async function refresh() {
    nodes = await get("/api/v2/nodes");
    render();
  }

  async function change(name, state) {
    if (state === "DRAINING" && !window.confirm(`Drain ${name}? Its running jobs are stopped and requeued.`)) return;
    try {
      await put(`/api/v2/nodes/${encodeURIComponent(name)}/state`, { value: state });
      ctx.report(null);
    } catch (e) {
      ctx.report(e);
    }
    await refresh().catch(ctx.report);
  }

  function render() {
    const columns = [
      { title: "Node", cell: (n) => [h("b", {}, n.name), h("div.muted", {}, n.address)] },
      { title: "State and health", cell: (n) => [badge(n.state), health(n)], class: "health" },
      { title: "GPUs", cell: gpus },
      { title: "CPU", cell: (n) => bar(n.used.cpu, n.total.cpu, "") },
      { title: "Memory", cell: (n) => bar(n.used.memoryMB, n.total.memoryMB, "MB") },
      { title: "Tasks", cell: tasks, class: "tasks" },
      { title: "Last heartbeat", cell: (n) => h("span", { title: new Date(n.lastHeartbeat).toString() },
        fmtAgo(n.lastHeartbeat)) },
    ];
    if (ctx.session.admin) columns.push({ title: "Actions", cell: actions, class: "actions" });
    show(body, table(columns, nodes, { empty: "No node has registered yet.", rowAttrs: (n) => ({ "data-node": n.name }) }));
  }

  const actions = (n) => ACTIONS[n.state].map(([label, state]) =>
    h("button", { type: "button", class: state === "DRAINING" ? "danger" : "", "data-action": state,
      onclick: () => change(n.name, state) }, label));

  return { title: "Nodes", refresh };
}

function gpus(n) {
  if (!n.total.gpu) return h("span.muted", {}, "none");
  return [bar(n.used.gpu, n.total.gpu - n.failedGpus.length, ""), n.gpuType ? h("div.muted", {}, n.gpuType) : null];
}

function tasks(n) {
  const others = n.otherUsersTasks || 0;  // where jobs are private, other users' tasks are only counted
  if (!n.tasks.length && !others) return h("span.muted", {}, "—");
  return h("ul.plain", {}, n.tasks.map((t) => h("li", {}, jobLink(t.job), ` ${t.role}[${t.taskIndex}]`,
    t.gpus.length ? h("span.muted", {}, ` GPU ${t.gpus.join(",")}`) : null,
    t.state !== "RUNNING" ? h("span.muted", {}, ` ${t.state.toLowerCase()}`) : null)),
    others ? h("li.muted.other-tasks", {}, `${others} task${others > 1 ? "s" : ""} of other users`) : null);
}

function health(n) {
  const reasons = [...n.problems];
  if (n.failedGpus.length) reasons.push(`failed GPUs: ${n.failedGpus.join(", ")}`);
  if (n.state === "LOST") reasons.push("no heartbeat within the node timeout");
  return reasons.length ? h("ul.plain.warn", {}, reasons.map((r) => h("li", {}, r))) : h("div.ok.small", {}, "healthy");
}
