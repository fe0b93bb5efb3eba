// Users (admin area): every user with their admin flag, VCs and groups; create one (name, password, admin, VCs);
// make or unmake an admin, set their VCs and groups, reset their password, delete them. The users API as it is
// (/api/v2/users); each error is the API's, shown next to what was asked.
import { get, post, put, request } from "./api.js";
import { choices, chosen, errorText, field, form, h, panel, show, table, words } from "./dom.js";

const userPath = (name, tail = "") => `/api/v2/users/${encodeURIComponent(name)}${tail}`;

export function mount(root, ctx) {
  const list = h("div");
  const listNote = h("p.error", { role: "alert" });
  const editor = h("div");
  const vcBox = h("div.choices");
  const name = h("input", { name: "username", autocomplete: "off" });
  const password = h("input", { name: "password", type: "password", autocomplete: "new-password" });
  const admin = h("input", { name: "admin", type: "checkbox" });
  const create = form("create-user", [field("User", name), field("Password", password),
    h("label.check", {}, admin, "Admin"), field("Virtual clusters", vcBox)], "Create user", async () => {
    const username = name.value.trim();
    await post("/api/v2/users", { json: { username, password: password.value, admin: admin.checked,
      virtualCluster: chosen(vcBox) } });
    name.value = password.value = "";
    admin.checked = false;
    await refresh();
    return `Created ${username}.`;
  });
  root.append(panel("Users", listNote, list), panel("Create a user", create), editor);
  let vcs = null, users = [];

  async function refresh() {
    const [u, v] = await Promise.all([get("/api/v2/users"), get("/api/v2/virtual-clusters")]);
    users = u;
    const names = Object.keys(v);
    if (!vcs || names.join() !== vcs.join()) show(vcBox, choices("vc", names, vcs ? chosen(vcBox) : []));
    vcs = names;
    show(list, table(columns, users, { rowAttrs: (x) => ({ "data-user": x.username }) }));
  }

  async function rowAction(fn) {
    show(listNote);
    try {
      await fn();
    } catch (e) {
      show(listNote, errorText(e));
    }
    await refresh().catch(ctx.report);
  }

  const columns = [
    { title: "User", cell: (u) => [h("b", {}, u.username), u.admin ? h("span.tag", {}, "admin") : null] },
    { title: "Virtual clusters", cell: (u) => (u.admin ? h("span.muted", {}, "all (admin)") : u.virtualCluster.join(", ")) },
    { title: "Groups", cell: (u) => u.grouplist.join(", ") },
    { title: "E-mail", cell: (u) => u.email || "—" },
    { title: "Actions", class: "actions", cell: (u) => [
      h("button.small", { type: "button", "data-action": "edit", onclick: () => edit(u.username) }, "Edit"),
      h("button.small", { type: "button", "data-action": "admin",
        onclick: () => rowAction(() => put(userPath(u.username, "/admin"), { admin: !u.admin })) },
      u.admin ? "Revoke admin" : "Make admin"),
      h("button.small.danger", { type: "button", "data-action": "delete", onclick: () => {
        if (window.confirm(`Delete user ${u.username}? Their tokens go; their jobs stay.`)) {
          rowAction(() => request("DELETE", userPath(u.username)));
        }
      } }, "Delete")] },
  ];

  function edit(username) {
    const u = users.find((x) => x.username === username);
    if (!u) return;
    const vcChoice = h("div.choices", {}, choices("vc", vcs, u.virtualCluster));
    const groups = h("input", { name: "grouplist", value: u.grouplist.join(", ") });
    const secret = h("input", { name: "newPassword", type: "password", autocomplete: "new-password" });
    const saved = async (what) => {
      await refresh();
      return `${what} of ${username} saved.`;
    };
    show(editor, h("section.panel.user-editor", { "data-user": username },
      h("h2", {}, `Edit ${username}`, " ", h("button.small", { type: "button", onclick: () => show(editor) }, "Close")),
      h("div.editor-grid", {},
        form("user-vcs", field("Virtual clusters", vcChoice), "Set VCs", async () => {
          await put(userPath(username, "/virtualcluster"), { virtualCluster: chosen(vcChoice) });
          return saved("The VCs");
        }),
        form("user-groups", field("Groups (comma-separated)", groups), "Set groups", async () => {
          await put(userPath(username, "/grouplist"), { grouplist: words(groups) });
          return saved("The groups");
        }),
        form("user-password", field("New password", secret), "Reset password", async () => {
          await put(userPath(username, "/password"), { newPassword: secret.value });
          secret.value = "";
          return saved("The password");
        }))));
  }

  return { refresh };
}
