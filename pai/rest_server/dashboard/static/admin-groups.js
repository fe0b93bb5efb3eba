// Groups (admin area): every group and what its `extension.acls` grants (admin, VCs, storages), as OpenPAI keeps
// them; create one, edit its description, external name and grants (PUT /api/v2/groups with `patch`: the acls
// replace the group's), see its members, delete it. Each error is the API's, shown next to what was asked.
import { get, post, put, request } from "./api.js";
import { choices, chosen, errorText, field, form, h, panel, show, table } from "./dom.js";

const groupPath = (name, tail = "") => `/api/v2/groups/${encodeURIComponent(name)}${tail}`;
const acls = (g) => (g.extension && g.extension.acls) || {};

/** The fields of a group's description and grants; `read()` gives them back as a group's body. */
function grantFields(options, g = { description: "", externalName: "", extension: {} }) {
  const a = acls(g);
  const description = h("input", { name: "description", value: g.description || "" });
  const externalName = h("input", { name: "externalName", value: g.externalName || "" });
  const admin = h("input", { name: "admin", type: "checkbox", checked: a.admin === true });
  const vcs = h("div.choices", {}, choices("vc", options.vcs, a.virtualClusters || []));
  const storages = h("div.choices", {}, choices("storage", options.storages, a.storageConfigs || []));
  const nodes = [field("Description", description), field("External name", externalName),
    h("label.check", {}, admin, "Grants admin"), field("Grants virtual clusters", vcs),
    field("Grants storages", storages)];
  const read = () => ({ description: description.value, externalName: externalName.value,
    extension: { acls: { ...a, admin: admin.checked, virtualClusters: chosen(vcs), storageConfigs: chosen(storages) } } });
  return { nodes, read };
}

export function mount(root, ctx) {
  const list = h("div");
  const listNote = h("p.error", { role: "alert" });
  const creator = h("div");
  const editor = h("div");
  root.append(panel("Groups", listNote, list), creator, editor);
  let groups = [], options = null;

  async function refresh() {
    const [g, v, st] = await Promise.all([get("/api/v2/groups"), get("/api/v2/virtual-clusters"),
      get("/api/v2/storages")]);
    groups = g;
    const next = { vcs: Object.keys(v), storages: st.storages.map((s) => s.name) };
    if (!options || JSON.stringify(next) !== JSON.stringify(options)) {
      options = next;
      drawCreate();
    }
    show(list, table(columns, groups, { rowAttrs: (x) => ({ "data-group": x.groupname }) }));
  }

  function drawCreate() {
    const name = h("input", { name: "groupname", autocomplete: "off" });
    const grants = grantFields(options);
    show(creator, panel("Create a group", form("create-group", [field("Group", name), ...grants.nodes],
      "Create group", async () => {
        const groupname = name.value.trim();
        await post("/api/v2/groups", { json: { groupname, ...grants.read() } });
        name.value = "";
        await refresh();
        return `Created ${groupname}.`;
      })));
  }

  const columns = [
    { title: "Group", cell: (g) => h("b", {}, g.groupname) },
    { title: "Description", cell: (g) => [g.description || "—", g.externalName ? h("div.muted", {}, g.externalName) : null] },
    { title: "Grants", cell: (g) => grants(acls(g)) },
    { title: "Actions", class: "actions", cell: (g) => [
      h("button.small", { type: "button", "data-action": "edit", onclick: () => edit(g.groupname) }, "Edit"),
      h("button.small.danger", { type: "button", "data-action": "delete", onclick: () => remove(g.groupname) },
        "Delete")] },
  ];

  async function remove(name) {
    if (!window.confirm(`Delete group ${name}? Its members leave it.`)) return;
    show(listNote);
    try {
      await request("DELETE", groupPath(name));
    } catch (e) {
      show(listNote, errorText(e));
    }
    await refresh().catch(ctx.report);
  }

  async function edit(name) {
    const g = groups.find((x) => x.groupname === name);
    if (!g) return;
    const members = h("p.muted", {}, "…");
    const fields = grantFields(options, g);
    show(editor, h("section.panel.group-editor", { "data-group": name },
      h("h2", {}, `Edit ${name}`, " ", h("button.small", { type: "button", onclick: () => show(editor) }, "Close")),
      form("edit-group", fields.nodes, "Save", async () => {
        await put("/api/v2/groups", { patch: true, data: { groupname: name, ...fields.read() } });
        await refresh();
        return `${name} saved.`;
      }), h("h3", {}, "Members"), members));
    try {
      const users = await get(groupPath(name, "/userlist"));
      show(members, users.length ? users.map((u) => u.username).join(", ") : "nobody");
    } catch (e) {
      show(members, errorText(e));
    }
  }

  return { refresh };
}

function grants(a) {
  const out = [];
  if (a.admin === true) out.push(h("span.tag", {}, "admin"));
  if ((a.virtualClusters || []).length) out.push(h("div", {}, "VCs: ", a.virtualClusters.join(", ")));
  if ((a.storageConfigs || []).length) out.push(h("div", {}, "storages: ", a.storageConfigs.join(", ")));
  return out.length ? out : h("span.muted", {}, "nothing");
}
