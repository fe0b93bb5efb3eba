// Storages (admin area): every storage of the cluster configuration with its host path, groups and flags; create or
// replace one (PUT /api/v2/storages/{name}, checked as the configuration file is), delete one. A configuration file
// given to the master at its start replaces them again. Each error is the API's, shown next to what was asked.
import { get, put, request } from "./api.js";
import { errorText, field, form, h, panel, show, table, words } from "./dom.js";

const storagePath = (name) => `/api/v2/storages/${encodeURIComponent(name)}`;

export function mount(root, ctx) {
  const list = h("div");
  const listNote = h("p.error", { role: "alert" });
  const name = h("input", { name: "name", autocomplete: "off" });
  const path = h("input", { name: "path", placeholder: "/nfs/datasets" });
  const groups = h("input", { name: "groups", placeholder: "every user" });
  const readOnly = h("input", { name: "readOnly", type: "checkbox" });
  const byDefault = h("input", { name: "default", type: "checkbox" });
  const editor = form("storage", [field("Storage", name), field("Path on every node", path),
    field("Groups that may mount it (comma-separated; empty: every user)", groups),
    h("label.check", {}, readOnly, "Read-only"), h("label.check", {}, byDefault, "Mounted by default")],
  "Save storage", async () => {
    const body = { path: path.value.trim(), readOnly: readOnly.checked, default: byDefault.checked };
    if (words(groups).length) body.groups = words(groups);
    const answer = await put(storagePath(name.value.trim()), body);
    await refresh();
    return answer.message;
  });
  root.append(panel("Storages", listNote, list), panel("Create or replace a storage", editor));

  async function refresh() {
    const { storages } = await get("/api/v2/storages");  // an admin's list: every storage
    const details = await Promise.all(storages.map((s) => get(storagePath(s.name))));
    show(list, table(columns, details, { empty: "No storage is configured.",
      rowAttrs: (s) => ({ "data-storage": s.name }) }));
  }

  const columns = [
    { title: "Storage", cell: (s) => h("b", {}, s.name) },
    { title: "Path", cell: (s) => h("code", {}, s.data.path) },
    { title: "Groups", cell: (s) => (s.groups.length ? s.groups.join(", ") : h("span.muted", {}, "every user")) },
    { title: "Flags", cell: (s) => [s.readOnly ? "read-only " : "", s.default ? "default" : ""].join("") || "—" },
    { title: "Actions", class: "actions", cell: (s) => [
      h("button.small", { type: "button", "data-action": "edit", onclick: () => {
        name.value = s.name;
        path.value = s.data.path;
        groups.value = s.groups.join(", ");
        readOnly.checked = s.readOnly;
        byDefault.checked = s.default;
        path.focus();
      } }, "Edit"),
      h("button.small.danger", { type: "button", "data-action": "delete", onclick: () => remove(s.name) }, "Delete")] },
  ];

  async function remove(storage) {
    if (!window.confirm(`Delete storage ${storage}? Jobs already accepted keep their mounts.`)) return;
    show(listNote);
    try {
      await request("DELETE", storagePath(storage));
    } catch (e) {
      show(listNote, errorText(e));
    }
    await refresh().catch(ctx.report);
  }

  return { refresh };
}
