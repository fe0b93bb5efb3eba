// The admin area: #/admin/users, #/admin/groups, #/admin/vcs (VC shares), #/admin/storages, #/admin/tokens, each
// its own module (admin-NAME.js) under tabs, and a link to the nodes page's cordon and drain. Admins only: anyone
// else is shown a refusal, and the API refuses their changes anyway.
import { h } from "./dom.js";

const TABS = [["users", "Users"], ["groups", "Groups"], ["vcs", "VC shares"], ["storages", "Storages"],
  ["tokens", "Tokens"]];
const INTERVAL = 10000; // lists are read again this often; forms are left as they are

export function mount(root, ctx) {
  const tab = ctx.params[0] || "users";
  root.append(h("h1", {}, "Administration"));
  if (!ctx.session.admin) {
    root.append(h("p.error.refusal", { role: "alert" },
      `${ctx.session.user} is not an admin: only admins administer the cluster.`));
    return { title: "Administration" };
  }
  const body = h("div");
  root.append(h("div.tabs", {}, TABS.map(([key, title]) =>
    h("a.tab", { href: `#/admin/${key}`, class: key === tab ? "active" : "", "data-tab": key }, title)),
  h("a.tab", { href: "#/nodes", title: "cordon, uncordon and drain nodes" }, "Nodes ↗")), body);
  let page = null;
  const loaded = import(`./admin-${tab}.js`).then((m) => { page = m.mount(body, ctx); });
  return {
    title: `Administration · ${TABS.find(([k]) => k === tab)[1]}`,
    interval: INTERVAL,
    refresh: async () => {
      await loaded;
      if (page.refresh) await page.refresh();
    },
    unmount: () => page && page.unmount && page.unmount(),
  };
}
