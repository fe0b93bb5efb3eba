// VC shares (admin area): every VC's guaranteed and max share of the cluster; create one or change its shares
// (PUT /api/v2/virtual-clusters/{vc} with OpenPAI's `vcCapacity` and `vcMaxCapacity`, percents of every resource),
// delete one. The API checks the shares (the guarantees must fit the cluster); its error is shown as it answers.
import { get, put, request } from "./api.js";
import { badge, errorText, field, form, h, panel, show, table } from "./dom.js";

const vcPath = (name) => `/api/v2/virtual-clusters/${encodeURIComponent(name)}`;

/** A number input's value as the API should see it: a number, or the text as typed (the API says what is wrong). */
function number(input) {
  const v = input.value.trim();
  if (v === "") return undefined;
  return Number.isNaN(Number(v)) ? v : Number(v);
}

export function mount(root, ctx) {
  const list = h("div");
  const listNote = h("p.error", { role: "alert" });
  const name = h("input", { name: "vc", autocomplete: "off" });
  const capacity = h("input", { name: "vcCapacity", inputmode: "decimal", placeholder: "e.g. 20" });
  const maximum = h("input", { name: "vcMaxCapacity", inputmode: "decimal", placeholder: "100" });
  const share = form("vc-share", [field("Virtual cluster", name), field("Guaranteed share (%)", capacity),
    field("Max share (%)", maximum)], "Save share", async () => {
    const vc = name.value.trim();
    const answer = await put(vcPath(vc), { vcCapacity: number(capacity), vcMaxCapacity: number(maximum) });
    await refresh();
    return answer.message;
  });
  root.append(panel("Virtual clusters", listNote, list),
    panel("Create a VC or change its share", h("p.muted", {}, "Percents of the whole cluster (GPU, CPU and " +
      "memory alike); a new VC also gets a group of its name that grants it. Users are given VCs on the Users " +
      "tab."), share));

  async function refresh() {
    const vcs = Object.values(await get("/api/v2/virtual-clusters"));
    show(list, table(columns, vcs, { rowAttrs: (v) => ({ "data-vc": v.name }) }));
  }

  const columns = [
    { title: "VC", cell: (v) => h("a", { href: `#/vcs/${encodeURIComponent(v.name)}` }, v.name) },
    { title: "Status", cell: (v) => badge(v.status.toUpperCase()) },
    { title: "Guaranteed", class: "num", cell: (v) => `${v.capacity}%` },
    { title: "Max", class: "num", cell: (v) => `${v.maxCapacity}%` },
    { title: "Used", class: "num", cell: (v) => `${v.usedCapacity}%` },
    { title: "Jobs", cell: (v) => `${v.numRunningJobs} running, ${v.numPendingJobs} waiting` },
    { title: "Actions", class: "actions", cell: (v) => [
      h("button.small", { type: "button", "data-action": "edit", onclick: () => {
        name.value = v.name;
        capacity.value = String(v.capacity);
        maximum.value = String(v.maxCapacity);
        capacity.focus();
      } }, "Edit share"),
      v.name === "default" ? null : h("button.small.danger", { type: "button", "data-action": "delete",
        onclick: () => remove(v.name) }, "Delete")] },
  ];

  async function remove(vc) {
    if (!window.confirm(`Delete virtual cluster ${vc}? Its group goes too.`)) return;
    show(listNote);
    try {
      await request("DELETE", vcPath(vc));
    } catch (e) {
      show(listNote, errorText(e));
    }
    await refresh().catch(ctx.report);
  }

  return { refresh };
}
